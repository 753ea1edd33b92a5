-- Hermes schema, version 22: what the platforms reported about each message we sent, and
-- bursts of chat messages held for one answer (docs/channels.md, statuses and bursts).

-- Every message a chat reply became on its platform: the platform's id of it (a WhatsApp
-- wamid, a Telegram message id, an Instagram message id) and the last status the platform
-- reported. `status` only moves forward (accepted, sent, delivered, read); `failed` carries
-- Meta's error code and title.
CREATE TABLE platform_sends (
    message_id           uuid NOT NULL,
    part                 integer NOT NULL,
    run_id               uuid NOT NULL,
    platform             text NOT NULL,
    chat_id              text NOT NULL,
    platform_message_id  text NOT NULL,
    sent_at              timestamptz NOT NULL DEFAULT now(),
    status               text NOT NULL DEFAULT 'accepted',
    status_at            timestamptz,
    error_code           bigint,
    error_title          text,
    PRIMARY KEY (message_id, part)
);
-- Not unique: a Telegram message id is only unique within its chat, and a send is never
-- refused for its record.
CREATE INDEX platform_sends_platform_id ON platform_sends (platform, platform_message_id);
CREATE INDEX platform_sends_run ON platform_sends (run_id);
CREATE INDEX platform_sends_age ON platform_sends (sent_at);

-- The reply a send of a platform that reports failures late (WhatsApp) belongs to, so a part
-- the platform reports failed after accepting it can be sent again; `parts` is how many
-- messages the reply became, `attempt` counts those sends again (0 for the reply itself),
-- `resend_of` names the reply it repeats.
CREATE TABLE platform_send_replies (
    message_id  uuid PRIMARY KEY,
    run_id      uuid NOT NULL,
    payload     jsonb NOT NULL,
    parts       integer NOT NULL,
    resend_of   uuid,
    attempt     integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX platform_send_replies_age ON platform_send_replies (created_at);

-- A reply queued only to be parked with this reason (a part the platform reported failed
-- for good, or failing again after its sends again ran out).
ALTER TABLE delivery_sends
    ADD COLUMN park_reason text,
    ADD COLUMN park_detail text;

-- Chat messages held in their conversation's quiet window (HERMES_BURST_QUIET_MS), routed
-- together as one turn when it passes. Rows stay after release (`released_at`) so that a
-- duplicate of any message of a burst is still refused by the unique index.
CREATE TABLE burst_messages (
    message_id           uuid PRIMARY KEY,
    conversation         text NOT NULL,
    platform             text NOT NULL,
    sender_id            text NOT NULL,
    external_message_id  text,
    run_id               uuid NOT NULL,
    inbound              jsonb NOT NULL,
    traceparent          text,
    received_at          timestamptz NOT NULL DEFAULT now(),
    released_at          timestamptz
);
CREATE UNIQUE INDEX burst_messages_platform_message
    ON burst_messages (platform, external_message_id) WHERE external_message_id IS NOT NULL;
CREATE INDEX burst_messages_pending
    ON burst_messages (conversation, received_at) WHERE released_at IS NULL;
CREATE INDEX burst_messages_released ON burst_messages (released_at) WHERE released_at IS NOT NULL;

-- A conversation with held messages: when its first and last arrived.
CREATE TABLE burst_conversations (
    conversation  text PRIMARY KEY,
    first_at      timestamptz NOT NULL,
    last_at       timestamptz NOT NULL
);
