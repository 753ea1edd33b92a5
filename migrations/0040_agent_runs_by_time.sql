-- The console reads runs by time whatever their status: the overview's last hour (runs per
-- minute, answer latency) and the runs search's time range (docs/console.md). Run ids do not
-- always sort by time (a run named by a caller's X-Request-Id has a hashed id), so time needs
-- an index of its own. It replaces the index of closed runs by age, which retention read:
-- the full index serves that read as well, and the table keeps the same number of indexes.
DROP INDEX IF EXISTS agent_runs_closed_age;
CREATE INDEX agent_runs_created ON agent_runs (created_at);
