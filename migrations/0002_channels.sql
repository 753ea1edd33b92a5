-- Hermes schema, version 2: channel messages, their dedupe key, delivery statuses, REST keys.

-- Keys of the REST channel: only a hash is stored; the key is shown once at creation.
CREATE TABLE api_keys (
    id            uuid PRIMARY KEY,
    name          text NOT NULL,
    key_hash      text NOT NULL UNIQUE,
    key_prefix    text NOT NULL,
    callback_url  text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz
);

ALTER TABLE agent_runs
    ADD COLUMN api_key_id uuid REFERENCES api_keys (id),
    ADD COLUMN chat_id text,
    ADD COLUMN external_message_id text,
    ADD COLUMN metadata jsonb;

-- The durable guarantee behind ingest's fast Redis dedupe: one run per platform message.
CREATE UNIQUE INDEX agent_runs_platform_message
    ON agent_runs (platform, external_message_id)
    WHERE external_message_id IS NOT NULL;

-- Delivery statuses platforms report for the messages we sent (WhatsApp `statuses[]`).
CREATE TABLE message_statuses (
    platform             text NOT NULL,
    platform_message_id  text NOT NULL,
    status               text NOT NULL,
    recipient_id         text,
    error                jsonb,
    occurred_at          timestamptz NOT NULL,
    recorded_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform, platform_message_id, status)
);
