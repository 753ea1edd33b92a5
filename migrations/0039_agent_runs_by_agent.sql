-- The console's agents page (docs/console.md) reads each agent's runs of the last day:
-- time to acknowledge and to answer, re-wakes, expiries. Indexed by agent and time, so the
-- page costs the agent's recent runs, never the whole table.
CREATE INDEX agent_runs_agent_recent ON agent_runs (agent_id, created_at)
    WHERE agent_id IS NOT NULL;
