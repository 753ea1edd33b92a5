-- The Forge contract's dispatcher side (docs/agents.md, "The contract, item by item").

-- Pull-only agents: an external agent may have no webhook URL. It is never woken and pulls
-- its inbox (`agent.inbox.list`); its runs still end by their reply deadline.
ALTER TABLE agents DROP CONSTRAINT IF EXISTS agents_external_webhook;

-- BUSY pauses the dispatcher: a run assigned to an agent that is BUSY or OFFLINE is held
-- (unwoken, out of the inbox) from this moment until the agent is ONLINE again, bounded by
-- its reply deadline. NULL: not held.
ALTER TABLE agent_runs ADD COLUMN held_at timestamptz;
CREATE INDEX agent_runs_held ON agent_runs (agent_id) WHERE held_at IS NOT NULL;

-- Operable workspaces: the contract's `workspace.key` (NULL: derived from the slug) and the
-- daily budget of the workspace's Forge runs (NULL: the install's HERMES_FORGE_DAILY_*).
ALTER TABLE workspaces ADD COLUMN key text UNIQUE
    CHECK (key ~ '^[A-Z][A-Z0-9]{0,9}$');
ALTER TABLE workspaces ADD COLUMN daily_tokens bigint CHECK (daily_tokens >= 0);
ALTER TABLE workspaces ADD COLUMN daily_micro_usd bigint CHECK (daily_micro_usd >= 0);
