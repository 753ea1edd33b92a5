-- Operator console logins (docs/console.md): one row per login, found by the SHA-256 of the
-- token in its HttpOnly cookie (the token itself is never stored), with the key that logged
-- in (NULL: API_SERVER_KEY), the token every state-changing form carries (CSRF), and when it
-- ends. Any ingest replica reads it, so a login holds whichever replica serves the page.
CREATE TABLE console_sessions (
    token_hash   bytea PRIMARY KEY,
    api_key_id   uuid REFERENCES api_keys (id) ON DELETE CASCADE,
    csrf         text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
