-- Hermes schema, version 7: the llm stage's operator controls. Workspace-level provider
-- secrets (seed 002: a workspace value overrides the global key, an empty value clears it)
-- and an agent's backend override, switched at run time by `hermes agents set --backend`.

CREATE TABLE workspace_secrets (
    workspace_id  uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    name          text NOT NULL CHECK (name ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    -- Fernet token of the value (HERMES_SECRET_KEYS); an empty value is stored as ''
    -- because "cleared" carries meaning and is not a secret.
    value_enc     text NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, name)
);

ALTER TABLE agents
    ADD COLUMN backend        text CHECK (backend IN ('mock', 'hermes', 'openrouter', 'anthropic',
                                                      'gemini', 'openai', 'ollama')),
    ADD COLUMN backend_model  text,
    ADD CHECK ((backend IS NULL) = (backend_model IS NULL));
