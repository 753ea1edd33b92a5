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
