-- People who opted out of messages (docs/channels.md, "SMS through Twilio"): an SMS number
-- that sent STOP (or a synonym) is never sent to again until it sends START. Ingest writes
-- the row before it answers the webhook and deletes it on START; delivery reads it by key
-- before every send to the platform. Kept through `hermes users erase` and retention: the
-- opt-out is the person's standing instruction, and forgetting it would message them again.
CREATE TABLE opt_outs (
    platform      text NOT NULL,
    sender_id     text NOT NULL,
    opted_out_at  timestamptz NOT NULL DEFAULT now(),
    -- The platform's id of the message that said STOP.
    message_id    text,
    PRIMARY KEY (platform, sender_id)
);
