//! The answers owed to Forge chat threads (`forge_answers`, docs/agents.md, "Answers stream
//! to the Forge"): the preflight records the thread and its draft, delivery reads whether
//! the run it closes owes one, and the tools stage marks it posted.

use hermes_types::ids::RunId;

use super::{DbError, GenericClient, stmt};

/// Where a run's answer goes in the Forge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owed {
    pub thread_id: String,
    /// The draft the preflight opened; `None`: the answer goes as one message.
    pub draft_id: Option<String>,
}

/// Record that `run`'s answer is owed to `owed` (a redelivered preflight keeps the first
/// record: a second draft it may have opened stays empty, the answer goes to the first).
pub async fn record(c: &impl GenericClient, run: RunId, owed: &Owed) -> Result<(), DbError> {
    let sql = "INSERT INTO forge_answers (run_id, thread_id, draft_id) VALUES ($1, $2, $3)
               ON CONFLICT (run_id) DO NOTHING";
    c.execute(
        &stmt(c, sql).await?,
        &[&run.as_uuid(), &owed.thread_id, &owed.draft_id],
    )
    .await?;
    Ok(())
}

/// Where `run`'s answer is owed, if it is and has not been posted yet.
pub async fn unposted(c: &impl GenericClient, run: RunId) -> Result<Option<Owed>, DbError> {
    let sql = "SELECT thread_id, draft_id FROM forge_answers
                WHERE run_id = $1 AND posted_at IS NULL";
    let row = c.query_opt(&stmt(c, sql).await?, &[&run.as_uuid()]).await?;
    Ok(row.map(|r| Owed {
        thread_id: r.get(0),
        draft_id: r.get(1),
    }))
}

/// Mark `run`'s answer posted: whether this call did (false: it was already, by a copy that
/// committed first).
pub async fn mark_posted(c: &impl GenericClient, run: RunId) -> Result<bool, DbError> {
    let sql = "UPDATE forge_answers SET posted_at = now()
                WHERE run_id = $1 AND posted_at IS NULL";
    Ok(c.execute(&stmt(c, sql).await?, &[&run.as_uuid()]).await? == 1)
}
