-- Hermes schema, version 9: money is not what may be lost (docs/models-and-budgets.md, where
-- budgets live). Per-user token usage, the platform's daily spend and the killswitch are kept
-- here durably; Redis holds a fast copy that is re-seeded from these rows when it forgets.

-- Settled tokens of one user in one window: `window_kind` 'day' (starts = the UTC day) or
-- 'month' (starts = the first day of the UTC month). No foreign key: a usage row of a
-- deleted user is harmless, and the gateway meters callers it does not look up.
CREATE TABLE IF NOT EXISTS llm_token_usage (
    user_id     uuid        NOT NULL,
    window_kind text        NOT NULL CHECK (window_kind IN ('day', 'month')),
    starts      date        NOT NULL,
    used        bigint      NOT NULL DEFAULT 0 CHECK (used >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, window_kind, starts)
);

-- What every model call of one UTC day cost the platform, in integer micro-dollars.
CREATE TABLE IF NOT EXISTS llm_daily_spend (
    day        date        PRIMARY KEY,
    micro_usd  bigint      NOT NULL DEFAULT 0 CHECK (micro_usd >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The killswitch: one row at most (id is always true). Off keeps the row with is_on false.
CREATE TABLE IF NOT EXISTS llm_killswitch (
    id     boolean     PRIMARY KEY DEFAULT true CHECK (id),
    is_on  boolean     NOT NULL,
    reason text        NOT NULL DEFAULT '',
    since  timestamptz NOT NULL DEFAULT now()
);
