-- Messenger's 24-hour standard messaging window (docs/channels.md, "Facebook Messenger"): per
-- chat (the person's page-scoped id), when they last wrote (Meta's timestamp of their
-- message). The router upserts it in the transaction that creates the run of their message;
-- delivery reads it by key before it sends: inside the window a reply is a RESPONSE, outside
-- it goes with the configured message tag or is parked as outside_window.
CREATE TABLE messenger_windows (
    chat_id          text PRIMARY KEY,
    last_inbound_at  timestamptz NOT NULL
);
