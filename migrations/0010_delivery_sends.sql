-- Hermes schema, version 10: which parts of a chat reply reached the platform, and which copy
-- of the reply may send now (docs/channels.md, delivery). Kept here rather than in
-- Redis because a doubled message is a user-visible fault, and Redis may forget.
--
-- A row is written when a copy of a reply first takes the send lease; the transaction that
-- records the reply as processed marks it done, so a copy that comes later (a redelivery, a
-- second publish) learns under the row's lock that the reply is finished. Done rows are pruned
-- with `processed_messages` (3 days); rows of replies parked and never replayed after 8 days.
CREATE TABLE IF NOT EXISTS delivery_sends (
    message_id   uuid        PRIMARY KEY,
    -- The copy holding the send lease, and until when; NULL when nobody holds it.
    lease_holder uuid,
    lease_until  timestamptz,
    -- Indices of the reply's parts the platform accepted.
    sent_parts   integer[]   NOT NULL DEFAULT '{}',
    -- The reply's run was closed and the reply recorded as processed: send nothing more.
    done         boolean     NOT NULL DEFAULT false,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS delivery_sends_updated_at ON delivery_sends (updated_at);
