-- The OpenAI Responses API (docs/api.md, "Responses"): a response is a run of the API
-- platform plus what its caller sent. Ingest writes the row before it publishes the message,
-- so any replica can answer for it; the output, usage and status are the run's (joined), so
-- the row is complete whoever closed the run. No foreign key to agent_runs: the router
-- creates the run after this row exists.
CREATE TABLE responses (
    id                   uuid PRIMARY KEY,
    run_id               uuid NOT NULL UNIQUE,
    -- The key that created it; NULL for the operator key.
    api_key_id           uuid REFERENCES api_keys (id) ON DELETE CASCADE,
    conversation         text,
    previous_response_id uuid,
    -- The input items and instructions as received (empty when not stored).
    input                jsonb NOT NULL DEFAULT '[]'::jsonb,
    instructions         text,
    model                text,
    -- The sampling parameters the caller set (echoed back by a retrieve).
    params               jsonb NOT NULL DEFAULT '{}'::jsonb,
    store                boolean NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now()
);
-- The latest stored response of a key's named conversation.
CREATE INDEX responses_conversation ON responses (
    COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid), conversation, created_at DESC
) WHERE conversation IS NOT NULL AND store;
-- The retention sweeper deletes oldest first.
CREATE INDEX responses_age ON responses (created_at);

-- The tool round a run made (the assistant turn that asked for tools and the results), as
-- delivery closed it: the response's function_call items and the next turn's history.
ALTER TABLE agent_runs ADD COLUMN transcript jsonb;
