-- Readers of the event log no longer wait on `NOTIFY hermes_events`: each process that
-- serves operators polls the log's settled head while something waits (docs/operator-mcp.md,
-- events). A notifying commit takes a database-wide lock until it is flushed, so every
-- stage transaction that logged a message serialized with every other one; writers now pay
-- nothing for their readers (docs/performance.md, "NOTIFY at commit").
DROP TRIGGER events_notify ON events;
DROP FUNCTION events_notify();
