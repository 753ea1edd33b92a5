-- Sessions of the OpenAI-compatible API (docs/api.md, "Responses"): a chain of stored
-- responses, and the runs that continue one, share one session row, so that operators see
-- the chain as one conversation. API callers bring their own conversation and have no
-- user: their sessions belong to the key that made them (NULL: the operator key).
ALTER TABLE sessions ALTER COLUMN user_id DROP NOT NULL;
ALTER TABLE sessions ADD COLUMN api_key_id uuid REFERENCES api_keys (id) ON DELETE CASCADE;
ALTER TABLE sessions ADD CONSTRAINT sessions_user_or_api
    CHECK (user_id IS NOT NULL OR platform = 'api');
