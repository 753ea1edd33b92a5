//! Responses of the OpenAI Responses API (docs/api.md, "Responses"): what the caller sent,
//! written by ingest before the message is published, beside the run that answers it. The
//! output, usage and status are read from the run's row, so a response is complete whichever
//! replica closed its run. A response stored with `store: false` is kept only as the link
//! between its run and its caller: it is never read back, chained to or shown.

use hermes_types::ids::{ApiKeyId, ResponseId, RunId, SessionId};
use hermes_types::model::{CallParams, ChatMessage};

use super::{Client, DbError};
use crate::runs::transcript_of;

/// A chain is rebuilt at most this many responses deep (a bound, not a product limit: a
/// longer conversation keeps its latest turns).
const MAX_CHAIN: i32 = 1000;

/// What ingest records when it accepts a request.
pub struct NewResponse<'a> {
    pub id: ResponseId,
    pub run_id: RunId,
    /// The calling key (`None`: the operator key).
    pub api_key_id: Option<ApiKeyId>,
    pub conversation: Option<&'a str>,
    pub previous: Option<ResponseId>,
    /// The `input` as received (a string or a list of items).
    pub input: &'a serde_json::Value,
    pub instructions: Option<&'a str>,
    pub model: Option<&'a str>,
    pub params: &'a CallParams,
    pub store: bool,
}

/// Record a response. Without `store`, its input and instructions are not kept.
pub async fn insert(client: &Client, r: &NewResponse<'_>) -> Result<(), DbError> {
    let empty = serde_json::Value::Array(Vec::new());
    let params = serde_json::to_value(r.params).map_err(|e| DbError::Invalid(e.to_string()))?;
    let (input, instructions) = if r.store {
        (r.input, r.instructions)
    } else {
        (&empty, None)
    };
    client
        .execute(
            &crate::stmt(
                client,
                "INSERT INTO responses (id, run_id, api_key_id, conversation, previous_response_id,
                                        input, instructions, model, params, store)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .await?,
            &[
                &r.id,
                &r.run_id.as_uuid(),
                &r.api_key_id,
                &r.conversation,
                &r.previous,
                input,
                &instructions,
                &r.model,
                &params,
                &r.store,
            ],
        )
        .await?;
    Ok(())
}

/// A stored response as its caller sent it.
#[derive(Clone, Debug)]
pub struct StoredResponse {
    pub id: ResponseId,
    pub run_id: RunId,
    pub api_key_id: Option<ApiKeyId>,
    pub conversation: Option<String>,
    pub previous: Option<ResponseId>,
    pub input: serde_json::Value,
    pub instructions: Option<String>,
    pub model: Option<String>,
    /// The sampling parameters the caller set (defaults when unreadable: they are only shown).
    pub params: CallParams,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// The stored response `id` as `viewer` may see it: a key sees only its own responses,
/// the operator key (`None`) every one. Responses sent with `store: false` are never found.
pub async fn get(
    client: &Client,
    id: ResponseId,
    viewer: Option<ApiKeyId>,
) -> Result<Option<StoredResponse>, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "SELECT run_id, api_key_id, conversation, previous_response_id, input,
                        instructions, model, created_at, params
                 FROM responses
                 WHERE id = $1 AND store AND ($2::uuid IS NULL OR api_key_id = $2)",
            )
            .await?,
            &[&id, &viewer],
        )
        .await?;
    Ok(row.map(|r| StoredResponse {
        id,
        run_id: RunId::from(r.get::<_, uuid::Uuid>(0)),
        api_key_id: r.get(1),
        conversation: r.get(2),
        previous: r.get(3),
        input: r.get(4),
        instructions: r.get(5),
        model: r.get(6),
        created_at: r.get(7),
        params: serde_json::from_value(r.get(8)).unwrap_or_default(),
    }))
}

/// The latest stored response of the named conversation of `owner` (`None`: the operator
/// key's own conversations; each key has its own names).
pub async fn latest_in_conversation(
    client: &Client,
    owner: Option<ApiKeyId>,
    name: &str,
) -> Result<Option<ResponseId>, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "SELECT id FROM responses
                 WHERE COALESCE(api_key_id, '00000000-0000-0000-0000-000000000000'::uuid)
                         = COALESCE($1::uuid, '00000000-0000-0000-0000-000000000000'::uuid)
                   AND conversation = $2 AND store
                 ORDER BY created_at DESC, id DESC LIMIT 1",
            )
            .await?,
            &[&owner, &name],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

/// One earlier turn of a chain, oldest first: what its caller sent and how its run ended.
#[derive(Clone, Debug)]
pub struct Turn {
    pub id: ResponseId,
    pub input: serde_json::Value,
    /// The run's answer; `None` while it runs or when it failed.
    pub answer: Option<String>,
    /// The tool round the run made (empty when none).
    pub transcript: Vec<ChatMessage>,
    /// The session the run was routed into (`None` until it is routed).
    pub session: Option<SessionId>,
}

/// The session a chain's conversation lives in: that of its newest routed run (docs/api.md,
/// "Responses": a chain is one conversation, for memory and history too).
pub fn session_of(chain: &[Turn]) -> Option<SessionId> {
    chain.iter().rev().find_map(|t| t.session)
}

/// The chain that ends with the stored response `last`, oldest first. The chain stops at a
/// response that was deleted, expired or not stored.
pub async fn chain(client: &Client, last: ResponseId) -> Result<Vec<Turn>, DbError> {
    let rows = client
        .query(
            &crate::stmt(
                client,
                "WITH RECURSIVE c AS (
                     SELECT id, run_id, previous_response_id, input, 0 AS depth
                     FROM responses WHERE id = $1 AND store
                     UNION ALL
                     SELECT p.id, p.run_id, p.previous_response_id, p.input, c.depth + 1
                     FROM responses p JOIN c ON p.id = c.previous_response_id
                     WHERE p.store AND c.depth < $2)
                 SELECT c.id, c.input,
                        CASE WHEN r.status = 'completed' THEN r.output_text END, r.transcript,
                        r.session_id
                 FROM c LEFT JOIN agent_runs r ON r.id = c.run_id
                 ORDER BY c.depth DESC",
            )
            .await?,
            &[&last, &MAX_CHAIN],
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| Turn {
            id: r.get(0),
            input: r.get(1),
            answer: r.get(2),
            transcript: transcript_of(r.get(3)),
            session: r.get(4),
        })
        .collect())
}

/// Delete the stored response `id` as `viewer` may (see [`get`]); false when there was none.
pub async fn delete(
    client: &Client,
    id: ResponseId,
    viewer: Option<ApiKeyId>,
) -> Result<bool, DbError> {
    let n = client
        .execute(
            &crate::stmt(
                client,
                "DELETE FROM responses
                 WHERE id = $1 AND store AND ($2::uuid IS NULL OR api_key_id = $2)",
            )
            .await?,
            &[&id, &viewer],
        )
        .await?;
    Ok(n == 1)
}

/// Remove response `id` whatever its `store`: its message was never accepted, so no run
/// will ever answer it.
pub async fn discard(client: &Client, id: ResponseId) -> Result<(), DbError> {
    client
        .execute(
            &crate::stmt(client, "DELETE FROM responses WHERE id = $1").await?,
            &[&id],
        )
        .await?;
    Ok(())
}
