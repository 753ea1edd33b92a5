-- Hermes as an MCP server for operators (docs/operator-mcp.md): keys with the 'operator'
-- scope, a durable event log its clients read by cursor, and tool calls that wait for an
-- operator's approval.

-- Keys may hold the 'operator' scope (the operator MCP server at /mcp).
ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check
    CHECK (scopes <@ ARRAY['messages', 'chat', 'jobs', 'operator']::text[]
           AND cardinality(scopes) > 0);

-- A run whose tool call waits for an operator is open and `awaiting_approval`.
ALTER TABLE agent_runs DROP CONSTRAINT IF EXISTS agent_runs_status_check;
ALTER TABLE agent_runs ADD CONSTRAINT agent_runs_status_check CHECK (status IN
    ('routed', 'running', 'awaiting_tools', 'awaiting_approval',
     'completed', 'failed', 'cancelled', 'expired'));

-- What operators' MCP clients follow: messages in and out, approvals asked and answered,
-- replies that could not be delivered. Each row is written in the transaction of what it
-- records. Its position is (tx, id): `tx` is the writing transaction, and a row is shown
-- only once every transaction older than the oldest one still running has ended, so a
-- reader that moves its cursor past a row can never later find a row behind it
-- (shared/db/src/events.rs explains the order).
CREATE TABLE events (
    id          bigserial   PRIMARY KEY,
    tx          xid8        NOT NULL DEFAULT pg_current_xact_id(),
    kind        text        NOT NULL CHECK (kind IN
                    ('message', 'approval_requested', 'approval_resolved', 'delivery_failed')),
    workspace_id uuid,
    platform    text,
    chat_id     text,
    session_id  uuid,
    run_id      uuid,
    body        jsonb       NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_position ON events (tx, id);
CREATE INDEX events_created ON events (created_at);

-- Readers wait on this channel instead of polling; a statement's rows notify once, at commit.
CREATE FUNCTION events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hermes_events', '');
    RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_notify();

-- A tool call that waits for an operator (`requires_approval`). The round's whole tool
-- request is kept with each of its calls that waits, so the round resumes from the database
-- once every call of it is answered, on whatever replica answers last.
CREATE TABLE tool_approvals (
    id          uuid        PRIMARY KEY,
    run_id      uuid        NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    round       smallint    NOT NULL,
    call_id     text        NOT NULL,
    tool        text        NOT NULL,
    arguments   jsonb       NOT NULL,
    request     jsonb       NOT NULL,
    status      text        NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'allowed', 'denied', 'timed_out')),
    decided_by  text,
    reason      text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    deadline_at timestamptz NOT NULL,
    decided_at  timestamptz,
    UNIQUE (run_id, round, call_id)
);
CREATE INDEX tool_approvals_pending ON tool_approvals (deadline_at) WHERE status = 'pending';
CREATE INDEX tool_approvals_run ON tool_approvals (run_id, round);
