-- The dreaming engine (docs/models-and-budgets.md, "The dreaming engine"): one row per user
-- and ISO week that had a conversation. The router inserts it when the week is over, in the
-- transaction that queues the week's dream for the llm stage; the primary key is what makes
-- the dream happen once per user and week, whichever replica looks and however often. The
-- llm stage moves it from `queued` to its outcome in the transaction that writes the
-- insights, and writes nothing when it is no longer `queued`.
CREATE TABLE user_dreams (
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- Monday 00:00 UTC of the ISO week dreamt about.
    week_start   timestamptz NOT NULL,
    status       text NOT NULL DEFAULT 'queued'
                   CHECK (status IN ('queued', 'written', 'empty', 'failed')),
    input_tokens   bigint NOT NULL DEFAULT 0,
    output_tokens  bigint NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    PRIMARY KEY (user_id, week_start)
);

-- The week an insight or knowledge gap was dreamt from (NULL: written by other means).
ALTER TABLE user_insights ADD COLUMN week_start timestamptz;

-- Who talked in a week: the router's weekly look-up scans one week of inbound messages.
CREATE INDEX interactions_inbound_at ON interactions (created_at) WHERE direction = 'inbound';
