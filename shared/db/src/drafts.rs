//! Drafts (docs/agents.md, "Drafts"): an external agent's answer streamed chunk by chunk
//! (`chat.startDraft`, `chat.appendDraftChunk`, `chat.finalizeDraft`). The text so far is
//! kept here, so every update carries the whole text and any replica can continue the draft;
//! the chat message that shows it (Telegram edits one message as it grows) is recorded so
//! the final answer replaces it instead of repeating it.

use hermes_types::ids::{AgentId, DraftId, RunId};

use super::{DbError, GenericClient, Transaction};

/// A draft as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Draft {
    pub id: DraftId,
    pub run_id: RunId,
    pub agent_id: AgentId,
    pub body: String,
    pub chunks: i32,
    /// The platform message showing the draft, once delivery sent it.
    pub platform_message_id: Option<String>,
    /// How many chunks that message shows.
    pub shown_chunks: i32,
    pub finalized: bool,
}

const COLUMNS: &str = "id, run_id, agent_id, body, chunks, platform_message_id, shown_chunks, \
    finalized_at IS NOT NULL AS finalized";

fn from_row(r: &tokio_postgres::Row) -> Draft {
    Draft {
        id: r.get("id"),
        run_id: r.get("run_id"),
        agent_id: r.get("agent_id"),
        body: r.get("body"),
        chunks: r.get("chunks"),
        platform_message_id: r.get("platform_message_id"),
        shown_chunks: r.get("shown_chunks"),
        finalized: r.get("finalized"),
    }
}

/// Start a draft of `run_id` written by `agent_id`.
pub async fn start(
    client: &impl GenericClient,
    run_id: RunId,
    agent_id: AgentId,
) -> Result<DraftId, DbError> {
    let id = DraftId::new();
    client
        .execute(
            "INSERT INTO agent_drafts (id, run_id, agent_id) VALUES ($1, $2, $3)",
            &[&id, &run_id, &agent_id],
        )
        .await?;
    Ok(id)
}

/// One draft (`agent`: only if that agent writes it).
pub async fn get(
    client: &impl GenericClient,
    id: DraftId,
    agent: Option<AgentId>,
) -> Result<Option<Draft>, DbError> {
    let row = client
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM agent_drafts
                 WHERE id = $1 AND ($2::uuid IS NULL OR agent_id = $2)"
            ),
            &[&id, &agent],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

/// Append `delta` to an open draft of `agent`; the draft after it, or `None` when there is
/// no such open draft (unknown, another agent's, or finalized).
pub async fn append(
    tx: &Transaction<'_>,
    id: DraftId,
    agent: AgentId,
    delta: &str,
) -> Result<Option<Draft>, DbError> {
    let row = tx
        .query_opt(
            &format!(
                "UPDATE agent_drafts SET body = body || $3, chunks = chunks + 1, updated_at = now()
                 WHERE id = $1 AND agent_id = $2 AND finalized_at IS NULL
                 RETURNING {COLUMNS}"
            ),
            &[&id, &agent, &delta],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

/// Close a draft with its final text; false when it was not open.
pub async fn finalize(
    tx: &Transaction<'_>,
    id: DraftId,
    agent: AgentId,
    body: &str,
) -> Result<bool, DbError> {
    let n = tx
        .execute(
            "UPDATE agent_drafts SET body = $3, finalized_at = now(), updated_at = now()
             WHERE id = $1 AND agent_id = $2 AND finalized_at IS NULL",
            &[&id, &agent, &body],
        )
        .await?;
    Ok(n == 1)
}

/// Record that the chat shows the draft up to `chunks` in message `message_id`; false (and
/// nothing changed) when it already shows as much or more (an update that arrived late).
pub async fn mark_shown(
    client: &impl GenericClient,
    id: DraftId,
    message_id: &str,
    chunks: i32,
) -> Result<bool, DbError> {
    let n = client
        .execute(
            "UPDATE agent_drafts SET platform_message_id = $2, shown_chunks = $3
             WHERE id = $1 AND shown_chunks < $3",
            &[&id, &message_id, &chunks],
        )
        .await?;
    Ok(n == 1)
}
