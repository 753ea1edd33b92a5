-- The agent contract in both directions (docs/agents.md, "The agent's side"): external agents
-- pull, acknowledge and answer their runs through Hermes's MCP surface; their runs end, by an
-- answer, a failure or the reply deadline; and Hermes, woken by a Forge, answers as an agent.

-- A run an external agent never answered ends `expired` (its caller told, its credit back).
ALTER TABLE agent_runs DROP CONSTRAINT IF EXISTS agent_runs_status_check;
ALTER TABLE agent_runs ADD CONSTRAINT agent_runs_status_check CHECK (status IN
    ('routed', 'running', 'awaiting_tools', 'completed', 'failed', 'cancelled', 'expired'));

-- An external run's inbox state: when the agent acknowledged it (clears "wake sent"), when
-- its answer (or failure, or the expiry fallback) was claimed, so exactly one reply is ever
-- produced for it, its reply deadline, and how many wakes it was sent.
ALTER TABLE agent_runs
    ADD COLUMN acked_at    timestamptz,
    ADD COLUMN answered_at timestamptz,
    ADD COLUMN deadline_at timestamptz,
    ADD COLUMN wakes       integer NOT NULL DEFAULT 0 CHECK (wakes >= 0);

-- The open and closed partial indexes name every closed status (as 0015 did for cancelled).
DROP INDEX IF EXISTS agent_runs_open;
CREATE INDEX agent_runs_open ON agent_runs (created_at)
    WHERE status NOT IN ('completed', 'failed', 'cancelled', 'expired');
DROP INDEX IF EXISTS agent_runs_agent_open;
CREATE INDEX agent_runs_agent_open ON agent_runs (agent_id)
    WHERE status NOT IN ('completed', 'failed', 'cancelled', 'expired');
DROP INDEX IF EXISTS agent_runs_closed_age;
CREATE INDEX agent_runs_closed_age ON agent_runs (created_at)
    WHERE status IN ('completed', 'failed', 'cancelled', 'expired');
-- The expiry sweeper reads open external runs by deadline.
CREATE INDEX agent_runs_deadline ON agent_runs (deadline_at)
    WHERE deadline_at IS NOT NULL AND answered_at IS NULL
      AND status NOT IN ('completed', 'failed', 'cancelled', 'expired');

-- How long an external agent has to answer a run, and how many tool rounds an internal
-- agent's run may take (chat messages of the built-in persona keep one).
ALTER TABLE agents
    ADD COLUMN reply_deadline_secs integer NOT NULL DEFAULT 600 CHECK (reply_deadline_secs > 0),
    ADD COLUMN max_tool_rounds     integer NOT NULL DEFAULT 4
        CHECK (max_tool_rounds BETWEEN 1 AND 32);

-- A key linked to an agent is that agent's identity on the MCP surface.
ALTER TABLE api_keys ADD COLUMN agent_id uuid REFERENCES agents (id) ON DELETE CASCADE;
CREATE INDEX api_keys_agent ON api_keys (agent_id) WHERE agent_id IS NOT NULL;

-- A streamed answer in the making (chat.startDraft / appendDraftChunk / finalizeDraft): the
-- text so far is the truth; the chat message it is shown in (Telegram edits one message as
-- it grows) is remembered so the final text replaces it rather than repeating it.
CREATE TABLE agent_drafts (
    id                  uuid PRIMARY KEY,
    run_id              uuid NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    agent_id            uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    body                text NOT NULL DEFAULT '',
    chunks              integer NOT NULL DEFAULT 0,
    -- The platform message showing the draft, and how much of the body it shows.
    platform_message_id text,
    shown_chunks        integer NOT NULL DEFAULT 0,
    finalized_at        timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_drafts_run ON agent_drafts (run_id);

-- Forge wakes already taken (X-Forge-Delivery): a replayed delivery queues nothing.
CREATE TABLE forge_deliveries (
    delivery_id text PRIMARY KEY,
    profile_key text NOT NULL,
    run_id      uuid NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX forge_deliveries_age ON forge_deliveries (received_at);
