-- Hermes schema, version 23: the Forge route hardened (docs/security.md, "Forge wakes").
--
-- A wake is also known by what its signature covers (SHA-256 of "{timestamp}.{body}", or of
-- the body in the body-only scheme): a captured wake replayed under a fresh X-Forge-Delivery,
-- which no signature covers, finds its covered bytes taken and queues nothing. Rows taken
-- before this version have none (NULL never conflicts).
ALTER TABLE forge_deliveries ADD COLUMN covered bytea;
CREATE UNIQUE INDEX forge_deliveries_covered ON forge_deliveries (covered);

-- What the Forge runs of each workspace used per UTC day (tokens, integer micro-dollars),
-- counted over every model call of their tool loops and checked against
-- HERMES_FORGE_DAILY_TOKENS / HERMES_FORGE_DAILY_USD before each call. One row per
-- workspace and day, added to in one atomic statement per call.
CREATE TABLE llm_forge_usage (
    workspace_id uuid        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    day          date        NOT NULL,
    tokens       bigint      NOT NULL DEFAULT 0 CHECK (tokens >= 0),
    micro_usd    bigint      NOT NULL DEFAULT 0 CHECK (micro_usd >= 0),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, day)
);
