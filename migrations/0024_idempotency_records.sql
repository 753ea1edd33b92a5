-- Hermes schema, version 24: the API's `Idempotency-Key` records move from Redis to
-- PostgreSQL (docs/api.md, idempotency). In Redis they were keys with a TTL, which a
-- `volatile-*` eviction policy drops first when memory runs short, silently letting a
-- retried request run twice; here nothing evicts them. One row per (calling key, hash of
-- the caller's idempotency key): first the pending marker of the request that runs
-- (`token` set, `answer` NULL), then the answer it gave (`token` NULL). `expires_at` ends
-- either: a marker after the run timeout and a margin, an answer 24 hours after it was
-- kept. An expired row is taken over by the next request with its key, and deleted by the
-- relays' periodic cleanup.
CREATE TABLE idempotency_records (
    scope        text        NOT NULL,
    key_hash     text        NOT NULL,
    request_hash text        NOT NULL,
    token        uuid,
    answer       jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (scope, key_hash),
    CHECK ((token IS NULL) <> (answer IS NULL))
);

CREATE INDEX idempotency_records_expires_at ON idempotency_records (expires_at);
