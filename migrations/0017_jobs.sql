-- Scheduled jobs (docs/api.md, jobs; docs/architecture.md, the job scheduler): a prompt run
-- on a schedule for the key that made it (api_key_id NULL: the operator's). next_run_at is
-- the next due time (NULL while paused); the scheduler claims due rows with
-- FOR UPDATE SKIP LOCKED, moves next_run_at past now and writes the run's inbound message
-- into the outbox in the same transaction, so each due time runs once on any number of
-- replicas.
CREATE TABLE jobs (
    id           uuid PRIMARY KEY,
    api_key_id   uuid REFERENCES api_keys (id) ON DELETE CASCADE,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    prompt       text NOT NULL CHECK (length(prompt) > 0),
    -- {"cron": "...", "timezone": "..."} or {"every_seconds": N}
    schedule     jsonb NOT NULL,
    toolsets     text[],
    model        text,
    target_kind  text NOT NULL CHECK (target_kind IN ('stored', 'callback', 'chat')),
    -- {"type": "chat", "platform": "...", "chat_id": "..."} and the like
    target       jsonb NOT NULL,
    paused       boolean NOT NULL DEFAULT false,
    next_run_at  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (paused OR next_run_at IS NOT NULL)
);
-- What the scheduler's claim reads: due, unpaused jobs, oldest first.
CREATE INDEX jobs_due ON jobs (next_run_at) WHERE NOT paused;
CREATE INDEX jobs_key ON jobs (api_key_id, created_at);

-- One row per run of a job, written with the run's outbox row. A due time runs once: the
-- unique index refuses a second run of the same (job, due time) whatever claimed it.
CREATE TABLE job_runs (
    run_id      uuid PRIMARY KEY,
    job_id      uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    trigger     text NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    due_at      timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX job_runs_due ON job_runs (job_id, due_at) WHERE trigger = 'schedule';
CREATE INDEX job_runs_latest ON job_runs (job_id, created_at DESC);

-- Keys may hold the 'jobs' scope (the /api/jobs routes).
ALTER TABLE api_keys DROP CONSTRAINT IF EXISTS api_keys_scopes_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_scopes_check
    CHECK (scopes <@ ARRAY['messages', 'chat', 'jobs']::text[] AND cardinality(scopes) > 0);
