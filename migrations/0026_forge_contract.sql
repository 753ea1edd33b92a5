-- The Forge contract's signing rule (docs/agents.md, "Signed agent webhooks"): a wake is
-- signed with the agent's own secret if it has one, otherwise with its workspace's
-- synthetic secret. An external agent no longer needs a secret of its own.

-- Fernet token (HERMES_SECRET_KEYS) of the workspace's synthetic signing secret; never the
-- plain secret. Made by `hermes workspaces signing-secret`.
ALTER TABLE workspaces ADD COLUMN webhook_secret_enc text;

-- Was: an external agent needs a webhook URL and a secret of its own.
ALTER TABLE agents DROP CONSTRAINT IF EXISTS agents_check;
ALTER TABLE agents ADD CONSTRAINT agents_external_webhook
    CHECK (kind = 'internal' OR webhook_url IS NOT NULL);
