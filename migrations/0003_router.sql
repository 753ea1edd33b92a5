-- Hermes schema, version 3: users and their channels, credits, memory, sessions and
-- interactions, agents and their dispatch (the router's tables, DESIGN §5).

CREATE TABLE workspaces (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    slug        text NOT NULL UNIQUE,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
-- Every install has one workspace to start with; the CLI uses it unless told otherwise.
INSERT INTO workspaces (slug, name) VALUES ('default', 'Default workspace');

-- Agents: internal ones answered by the fleet's own models (persona, tier, toolsets), and
-- external runtimes woken by a signed webhook (DESIGN §1, seed 000).
CREATE TABLE agents (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id        uuid NOT NULL REFERENCES workspaces (id),
    profile_key         text NOT NULL CHECK (profile_key ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    kind                text NOT NULL CHECK (kind IN ('internal', 'external')),
    display_name        text NOT NULL,
    tone                text NOT NULL DEFAULT 'friendly'
                          CHECK (tone IN ('chill', 'friendly', 'professional', 'hype')),
    role                text,
    role_instructions   text,
    tier                text CHECK (tier IN ('free', 'starter', 'pro', 'venue-growth')),
    toolsets            text[] NOT NULL DEFAULT '{}',
    capabilities        text[] NOT NULL DEFAULT '{}',
    webhook_url         text,
    -- Fernet token of the signing secret (HERMES_SECRETS_KEYS); never the plain secret.
    webhook_secret_enc  text,
    max_concurrent      integer NOT NULL DEFAULT 1 CHECK (max_concurrent > 0),
    status              text NOT NULL DEFAULT 'ONLINE'
                          CHECK (status IN ('ONLINE', 'BUSY', 'OFFLINE')),
    engagement_mode     text NOT NULL DEFAULT 'EXECUTE'
                          CHECK (engagement_mode IN ('EXECUTE', 'REVIEW', 'RESEARCH', 'DISCUSS')),
    last_heartbeat_at   timestamptz,
    -- Round robin picks the eligible agent dispatched to longest ago.
    last_dispatched_at  timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, profile_key),
    CHECK (kind = 'internal' OR (webhook_url IS NOT NULL AND webhook_secret_enc IS NOT NULL))
);

CREATE TABLE users (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    workspace_id        uuid NOT NULL REFERENCES workspaces (id),
    display_name        text,
    tier                text NOT NULL DEFAULT 'free'
                          CHECK (tier IN ('free', 'starter', 'pro', 'venue-growth')),
    -- The balance; every movement is a credit_ledger row.
    credits             bigint NOT NULL DEFAULT 0 CHECK (credits >= 0),
    referral_code       text NOT NULL UNIQUE,
    -- An explicit assignment wins over mentions and round robin.
    agent_id            uuid REFERENCES agents (id),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE user_channels (
    id          bigserial PRIMARY KEY,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    platform    text NOT NULL,
    sender_id   text NOT NULL,
    activated   boolean NOT NULL DEFAULT true,
    agent_id    uuid REFERENCES agents (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (platform, sender_id)
);

CREATE TABLE credit_ledger (
    id             bigserial PRIMARY KEY,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    run_id         uuid,
    reason         text NOT NULL CHECK (reason IN ('grant', 'charge', 'refund', 'adjust')),
    delta          bigint NOT NULL,
    balance_after  bigint NOT NULL,
    note           text,
    created_at     timestamptz NOT NULL DEFAULT now()
);
-- A run is charged at most once and refunded at most once, whoever retries.
CREATE UNIQUE INDEX credit_ledger_once ON credit_ledger (run_id, reason)
    WHERE run_id IS NOT NULL AND reason IN ('charge', 'refund');
CREATE INDEX credit_ledger_user ON credit_ledger (user_id, id);

-- Structural keys (one value each) and free facts (several, with embeddings as real[] so
-- recall works on stock PostgreSQL; a user's memory is small enough to rank in the router).
CREATE TABLE user_memory (
    id          bigserial PRIMARY KEY,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    key         text NOT NULL,
    value       text NOT NULL,
    structural  boolean NOT NULL,
    embedding   real[],
    source      text NOT NULL DEFAULT 'operator' CHECK (source IN ('operator', 'extracted')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX user_memory_structural ON user_memory (user_id, key) WHERE structural;
CREATE INDEX user_memory_facts ON user_memory (user_id) WHERE NOT structural;

-- The dreaming engine's output: weekly insights and knowledge gaps to probe gently.
CREATE TABLE user_insights (
    id          bigserial PRIMARY KEY,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind        text NOT NULL CHECK (kind IN ('insight', 'knowledge_gap')),
    text        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_insights_user ON user_insights (user_id, kind, created_at DESC);

-- A conversation on one channel; a new one starts after the idle timeout.
CREATE TABLE sessions (
    id                uuid PRIMARY KEY,
    user_id           uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    platform          text NOT NULL,
    channel_id        text NOT NULL,
    started_at        timestamptz NOT NULL,
    last_activity_at  timestamptz NOT NULL
);
CREATE INDEX sessions_scope ON sessions (user_id, platform, channel_id, last_activity_at DESC);

-- Every inbound and outbound message: the truth the Redis history is rebuilt from.
CREATE TABLE interactions (
    id          bigserial PRIMARY KEY,
    run_id      uuid NOT NULL,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    session_id  uuid NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    direction   text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
    text        text NOT NULL,
    meta        jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, direction)
);
CREATE INDEX interactions_session ON interactions (session_id, id);
CREATE INDEX interactions_user_inbound ON interactions (user_id, created_at DESC)
    WHERE direction = 'inbound';

ALTER TABLE agent_runs
    ADD COLUMN user_id          uuid REFERENCES users (id),
    ADD COLUMN agent_id         uuid REFERENCES agents (id),
    ADD COLUMN session_id       uuid REFERENCES sessions (id),
    ADD COLUMN dispatch         jsonb,
    ADD COLUMN engagement_mode  text,
    ADD COLUMN contract_version text,
    ADD COLUMN credits_charged  bigint NOT NULL DEFAULT 0,
    ADD COLUMN provenance       jsonb;
-- Round robin counts the runs an agent still has open against its max_concurrent.
CREATE INDEX agent_runs_agent_open ON agent_runs (agent_id)
    WHERE status NOT IN ('completed', 'failed');

CREATE TABLE activity_events (
    id          bigserial PRIMARY KEY,
    run_id      uuid,
    agent_id    uuid REFERENCES agents (id),
    user_id     uuid REFERENCES users (id) ON DELETE SET NULL,
    kind        text NOT NULL,
    data        jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX activity_events_run ON activity_events (run_id);

-- Wake webhooks owed to external agents; delivery sends them signed and records the result.
CREATE TABLE webhook_deliveries (
    id            uuid PRIMARY KEY,
    run_id        uuid NOT NULL,
    agent_id      uuid NOT NULL REFERENCES agents (id),
    event         text NOT NULL,
    status        text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    delivered_at  timestamptz
);
CREATE INDEX webhook_deliveries_run ON webhook_deliveries (run_id);
