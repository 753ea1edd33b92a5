-- WhatsApp's 24-hour customer-service window (docs/channels.md, "WhatsApp's window and
-- templates"): per chat, when the user last wrote (Meta's timestamp of their message) and the
-- profile name they write under. The router upserts the row in the transaction that creates
-- the run of a user's WhatsApp message; delivery reads it by key before it sends, and sends a
-- configured template instead of free text once the window has closed. One row per chat, its
-- key never updated and its other columns not indexed, so an update is a heap-only one.
CREATE TABLE whatsapp_windows (
    chat_id          text PRIMARY KEY,
    last_inbound_at  timestamptz NOT NULL,
    user_name        text
);
