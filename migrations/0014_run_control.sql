-- Runs a caller can watch and stop (docs/api.md, runs): a run is `running` once a stage
-- works on it, `cancelled` when a stop request ended it; a stop request is recorded on the
-- row, so whichever replica reaches the run's next safe point sees it.
ALTER TABLE agent_runs DROP CONSTRAINT IF EXISTS agent_runs_status_check;
ALTER TABLE agent_runs ADD CONSTRAINT agent_runs_status_check CHECK (status IN
    ('routed', 'running', 'awaiting_tools', 'completed', 'failed', 'cancelled'));
ALTER TABLE agent_runs ADD COLUMN stop_requested_at timestamptz;
