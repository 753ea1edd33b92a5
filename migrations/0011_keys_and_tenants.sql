-- Hermes schema, version 11: keys and tenants (docs/security.md, keys and tenants).
-- A REST key is a tenant: the senders it names and the message ids it sends are its own,
-- its callbacks are signed with its own secret, and a failed run keeps the provider's
-- (scrubbed) detail for operators only.

-- The sentinel that stands for "no key" (the operator's API_SERVER_KEY, or a chat platform)
-- in the two unique indexes below, so that NULL compares equal to NULL there.

-- A REST sender is linked under the key that may post as it; NULL: only the operator key.
ALTER TABLE user_channels
    ADD COLUMN api_key_id uuid REFERENCES api_keys (id) ON DELETE CASCADE;
ALTER TABLE user_channels DROP CONSTRAINT user_channels_platform_sender_id_key;
CREATE UNIQUE INDEX user_channels_sender ON user_channels
    (platform, COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid), sender_id);

-- One run per message id per key: key B reusing key A's id is a message of its own.
DROP INDEX agent_runs_platform_message;
CREATE UNIQUE INDEX agent_runs_platform_message ON agent_runs
    (platform, COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid), external_message_id)
    WHERE external_message_id IS NOT NULL;

-- The Standard Webhooks secret callbacks are signed with, as a Fernet token
-- (HERMES_SECRET_KEYS); shown once at creation and at each rotation.
ALTER TABLE api_keys ADD COLUMN callback_secret_enc text;

-- What went wrong with a failed run, scrubbed of credentials: for operators, never callers.
ALTER TABLE agent_runs ADD COLUMN error_detail text;

-- What a key may do and spend (docs/models-and-budgets.md, API keys): its scopes
-- ('messages': the REST channel; 'chat': the OpenAI-compatible API), its request rate, and
-- its daily and monthly token and dollar budgets (NULL: no limit of that kind).
ALTER TABLE api_keys
    ADD COLUMN scopes text[] NOT NULL DEFAULT '{messages}'
        CHECK (scopes <@ ARRAY['messages', 'chat']::text[] AND cardinality(scopes) > 0),
    ADD COLUMN requests_per_minute integer CHECK (requests_per_minute > 0),
    ADD COLUMN daily_tokens bigint CHECK (daily_tokens > 0),
    ADD COLUMN monthly_tokens bigint CHECK (monthly_tokens > 0),
    ADD COLUMN daily_micro_usd bigint CHECK (daily_micro_usd > 0),
    ADD COLUMN monthly_micro_usd bigint CHECK (monthly_micro_usd > 0);

-- Settled usage of one key in one window ('day' or 'month', as llm_token_usage): tokens and
-- integer micro-dollars, written after each call the key's messages made.
CREATE TABLE llm_key_usage (
    api_key_id  uuid        NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    window_kind text        NOT NULL CHECK (window_kind IN ('day', 'month')),
    starts      date        NOT NULL,
    tokens      bigint      NOT NULL DEFAULT 0 CHECK (tokens >= 0),
    micro_usd   bigint      NOT NULL DEFAULT 0 CHECK (micro_usd >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (api_key_id, window_kind, starts)
);
