-- The console's runs search by chat (docs/console.md): a chat's runs, newest first, read
-- through an index rather than a scan of every run. Senders are found through the user they
-- are linked to (the index of runs by user). Measured with pgbench on the bare insert into
-- agent_runs, two clients, three alternated rounds of 15 s: 8,396 inserts/s without it and
-- 8,647 with it (medians): no cost above the noise.
CREATE INDEX agent_runs_chat ON agent_runs (chat_id);
