-- Fan-out (docs/a2a.md, "Delegating to other workspaces"): a workspace whose runs may
-- delegate (`orchestrator`), each tool round held for the runs its `delegate_task_async`
-- calls started (kept whole, to resume from the database on whatever replica closes the
-- last of them), and each delegated run's link to that round, with its answer once it
-- ended.
ALTER TABLE workspaces ADD COLUMN orchestrator boolean NOT NULL DEFAULT false;

CREATE TABLE delegation_rounds (
    parent_run_id uuid        NOT NULL REFERENCES agent_runs (id) ON DELETE CASCADE,
    round         smallint    NOT NULL,
    -- The round's tool request, with the results of its calls that were not delegations.
    request       jsonb       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    -- Set by the close of the last delegated run, which queues the round again.
    resumed_at    timestamptz,
    PRIMARY KEY (parent_run_id, round)
);

CREATE TABLE delegations (
    -- The delegated run's id; its agent_runs row is written by the router, later.
    child_run_id  uuid        PRIMARY KEY,
    parent_run_id uuid        NOT NULL,
    round         smallint    NOT NULL,
    call_id       text        NOT NULL,
    workspace_id  uuid        NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    depth         smallint    NOT NULL CHECK (depth BETWEEN 1 AND 16),
    task          text        NOT NULL,
    status        text        NOT NULL DEFAULT 'running'
                      CHECK (status IN ('running', 'completed', 'failed', 'cancelled', 'expired')),
    -- The delegated run's answer, or its failure's message.
    result        text,
    error_code    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    FOREIGN KEY (parent_run_id, round)
        REFERENCES delegation_rounds (parent_run_id, round) ON DELETE CASCADE,
    UNIQUE (parent_run_id, round, call_id)
);

-- A parent's delegations still running (the stop of a parent, the stuck-run sweeper).
CREATE INDEX delegations_running ON delegations (parent_run_id) WHERE finished_at IS NULL;
