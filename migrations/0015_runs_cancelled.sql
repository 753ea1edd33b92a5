-- A cancelled run (docs/api.md, runs) is closed like a completed or failed one: the partial
-- indexes of open and of closed runs name it, so the queries that exclude or select closed
-- runs (the stuck-run sweeper, round robin's open-run count, retention) keep using them.
DROP INDEX IF EXISTS agent_runs_open;
CREATE INDEX agent_runs_open ON agent_runs (created_at)
    WHERE status NOT IN ('completed', 'failed', 'cancelled');
DROP INDEX IF EXISTS agent_runs_agent_open;
CREATE INDEX agent_runs_agent_open ON agent_runs (agent_id)
    WHERE status NOT IN ('completed', 'failed', 'cancelled');
DROP INDEX IF EXISTS agent_runs_closed_age;
CREATE INDEX agent_runs_closed_age ON agent_runs (created_at)
    WHERE status IN ('completed', 'failed', 'cancelled');
