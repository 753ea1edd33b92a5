-- A Forge chat run's answer (docs/agents.md, "Answers stream to the Forge"): the thread it
-- is owed to and the draft the preflight opened there, written with the preflight's model
-- call; `posted_at` is set in the transaction that acknowledges the answer's post, so a
-- copy of the answer's message finds it posted and posts nothing.
CREATE TABLE forge_answers (
    run_id      uuid PRIMARY KEY REFERENCES agent_runs (id) ON DELETE CASCADE,
    thread_id   text NOT NULL,
    -- Absent: the Forge has no draft tools, or its draft did not open; the answer then goes
    -- as one `chat.appendMessage`.
    draft_id    text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    posted_at   timestamptz
);
