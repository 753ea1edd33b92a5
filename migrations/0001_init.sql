-- Hermes schema, version 1: runs, the outbox, idempotency records and the tool registry.

-- One AgentRun per inbound message: the unit every stage reports on.
CREATE TABLE agent_runs (
    id           uuid PRIMARY KEY,
    platform     text NOT NULL,
    sender_id    text NOT NULL,
    status       text NOT NULL CHECK (status IN
                   ('routed', 'awaiting_tools', 'completed', 'failed')),
    tier         text NOT NULL,
    input_text   text,
    output_text  text,
    error_code   text,
    model        text,
    tokens_in    bigint NOT NULL DEFAULT 0,
    tokens_out   bigint NOT NULL DEFAULT 0,
    tools_used   text[] NOT NULL DEFAULT '{}',
    traceparent  text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);
CREATE INDEX agent_runs_open ON agent_runs (created_at)
    WHERE status NOT IN ('completed', 'failed');

-- Messages a stage emits, written in the same transaction as its effects and published
-- by the relay (DESIGN §3.2).
CREATE TABLE outbox (
    id            bigserial PRIMARY KEY,
    message_id    uuid NOT NULL,
    stage         text NOT NULL,
    traceparent   text,
    body          bytea NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    published_at  timestamptz,
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text
);
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;

CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hermes_outbox', '');
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();

-- (consumer, message id) pairs already processed: the idempotency guard (DESIGN §3.3).
CREATE TABLE processed_messages (
    consumer      text NOT NULL,
    message_id    uuid NOT NULL,
    processed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);
CREATE INDEX processed_messages_age ON processed_messages (processed_at);

-- Tools the tools service can run, published at its start for the router and llm stage.
CREATE TABLE tool_registry (
    name         text PRIMARY KEY,
    description  text NOT NULL,
    parameters   jsonb NOT NULL,
    toolset      text NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
