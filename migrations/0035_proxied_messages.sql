-- Proxy mode (docs/api.md, "Proxy mode"): each message an edge install forwarded to the
-- upstream Hermes, and where its answer goes. The row is written before the message is
-- sent, so an answer, however fast it comes back, always finds it; the upstream's run id is
-- added once the upstream has taken the message.
CREATE TABLE proxied_messages (
    run_id           uuid PRIMARY KEY,
    reply_to         jsonb NOT NULL,
    upstream_run_id  uuid,
    created_at       timestamptz NOT NULL DEFAULT now(),
    forwarded_at     timestamptz
);
CREATE INDEX proxied_messages_age ON proxied_messages (created_at);
