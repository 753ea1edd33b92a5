-- What tenants' keys and external agents may do (docs/security.md, "Keys and tenants").

-- A key's API and job runs are offered only the local-host toolsets (or tools) it was granted
-- with `hermes api-keys create|set --toolsets`: none unless granted.
ALTER TABLE api_keys ADD COLUMN toolsets text[] NOT NULL DEFAULT '{}';

-- What an external agent remembers (`memory.remember`) is its own source: capped per user,
-- and its facts expire under retention like extracted ones.
ALTER TABLE user_memory DROP CONSTRAINT IF EXISTS user_memory_source_check;
ALTER TABLE user_memory ADD CONSTRAINT user_memory_source_check
    CHECK (source IN ('operator', 'extracted', 'agent'));
DROP INDEX IF EXISTS user_memory_extracted_age;
CREATE INDEX user_memory_expiring_age ON user_memory (updated_at)
    WHERE source IN ('extracted', 'agent') AND NOT structural;
-- Until now an agent's memory was stored as the operator's. Its `memory.remembered` activity
-- event was written in the same transaction (the same now()), which finds those rows.
UPDATE user_memory m SET source = 'agent'
FROM activity_events e
WHERE e.kind = 'memory.remembered' AND e.user_id = m.user_id AND m.source = 'operator'
  AND e.data ->> 'key' = m.key
  AND e.created_at = CASE WHEN m.structural THEN m.updated_at ELSE m.created_at END;

-- An explicit assignment (a user's or a channel's agent) names an agent of the user's own
-- workspace. Assignments that named another workspace's agent are cleared (dispatch then
-- chooses within the user's workspace).
DO $$
DECLARE
    users_cleared bigint;
    channels_cleared bigint;
BEGIN
    UPDATE users u SET agent_id = NULL
    FROM agents a WHERE a.id = u.agent_id AND a.workspace_id <> u.workspace_id;
    GET DIAGNOSTICS users_cleared = ROW_COUNT;
    UPDATE user_channels c SET agent_id = NULL
    FROM users u, agents a
    WHERE u.id = c.user_id AND a.id = c.agent_id AND a.workspace_id <> u.workspace_id;
    GET DIAGNOSTICS channels_cleared = ROW_COUNT;
    IF users_cleared + channels_cleared > 0 THEN
        RAISE NOTICE 'cleared % user and % channel assignments to agents of another workspace',
            users_cleared, channels_cleared;
    END IF;
END $$;

ALTER TABLE agents ADD CONSTRAINT agents_id_workspace UNIQUE (id, workspace_id);
ALTER TABLE users ADD CONSTRAINT users_agent_in_workspace
    FOREIGN KEY (agent_id, workspace_id) REFERENCES agents (id, workspace_id);

-- A channel row has no workspace of its own: its user's is checked.
CREATE FUNCTION hermes_channel_agent_in_workspace() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.agent_id IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM users u JOIN agents a ON a.workspace_id = u.workspace_id
        WHERE u.id = NEW.user_id AND a.id = NEW.agent_id
    ) THEN
        RAISE EXCEPTION 'agent % is not an agent of the workspace of user %', NEW.agent_id, NEW.user_id
            USING ERRCODE = 'foreign_key_violation',
                  CONSTRAINT = 'user_channels_agent_in_workspace';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER user_channels_agent_in_workspace
    BEFORE INSERT OR UPDATE OF agent_id, user_id ON user_channels
    FOR EACH ROW EXECUTE FUNCTION hermes_channel_agent_in_workspace();
