-- Hermes schema, version 5: the session lookup index leaves out last_activity_at, so the
-- update that moves a session's activity on (every message) is a HOT update instead of a
-- new index entry. A scope has few sessions; sorting them by activity needs no index.
DROP INDEX sessions_scope;
CREATE INDEX sessions_scope ON sessions (user_id, platform, channel_id);
