-- A2A per workspace (docs/a2a.md): the `a2a` key scope, and each task's link from the run
-- that is it to the workspace and the context (`contextId`) it was sent in, with the text
-- sent, so a later message of the context gets the earlier turns as its history.
ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check
    CHECK (scopes <@ ARRAY['messages', 'chat', 'jobs', 'operator', 'a2a']::text[]
           AND cardinality(scopes) > 0);

CREATE TABLE a2a_tasks (
    -- The task id is the run id: the run's row (agent_runs) holds its status and answer.
    run_id       uuid PRIMARY KEY,
    workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    -- The key that sent it (NULL: the operator key); only that key sees the task.
    api_key_id   uuid REFERENCES api_keys (id) ON DELETE CASCADE,
    context_id   text NOT NULL,
    -- The caller's messageId and the text of its parts, as sent.
    message_id   text NOT NULL,
    input        text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX a2a_tasks_context ON a2a_tasks (workspace_id, context_id, created_at);
CREATE INDEX a2a_tasks_age ON a2a_tasks (created_at);
