-- Workspaces over HTTP (docs/agents.md, "Workspaces over HTTP"): what `POST /workspaces`
-- is told, and the install's global provider secrets (`PUT /settings/secrets`), which a
-- workspace's own secrets override and an empty workspace value clears.
ALTER TABLE workspaces
    ADD COLUMN runtime text,
    ADD COLUMN model   text,
    ADD COLUMN role    text;

CREATE TABLE global_secrets (
    name        text PRIMARY KEY CHECK (name ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    -- Fernet token of the value (HERMES_SECRET_KEYS); a cleared global secret is deleted.
    value_enc   text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
