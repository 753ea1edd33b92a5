//! Proxy mode's ledger (docs/api.md, "Proxy mode"): each message an edge install forwarded
//! upstream, keyed by the edge's run id, with where its answer goes. Recorded before the
//! message leaves, so the answer finds it however fast it comes back; the answer is looked
//! up by that run id, which the upstream echoes as the callback's `message_id`.

use hermes_types::ids::RunId;
use hermes_types::model::ReplyTo;

use super::{Client, DbError, Transaction};

/// Record that run `run` goes upstream and its answer to `reply_to`, in the transaction that
/// writes the run. Idempotent: a redelivered message keeps its row.
pub async fn record(tx: &Transaction<'_>, run: RunId, reply_to: &ReplyTo) -> Result<(), DbError> {
    let reply_to = serde_json::to_value(reply_to).map_err(|e| DbError::Invalid(e.to_string()))?;
    tx.execute(
        &crate::stmt(
            tx,
            "INSERT INTO proxied_messages (run_id, reply_to) VALUES ($1, $2)
             ON CONFLICT (run_id) DO NOTHING",
        )
        .await?,
        &[&run.as_uuid(), &reply_to],
    )
    .await?;
    Ok(())
}

/// Note that the upstream took run `run` as its own run `upstream`.
pub async fn forwarded(
    tx: &Transaction<'_>,
    run: RunId,
    upstream: Option<uuid::Uuid>,
) -> Result<(), DbError> {
    tx.execute(
        &crate::stmt(
            tx,
            "UPDATE proxied_messages
             SET upstream_run_id = COALESCE($2, upstream_run_id),
                 forwarded_at = COALESCE(forwarded_at, now())
             WHERE run_id = $1",
        )
        .await?,
        &[&run.as_uuid(), &upstream],
    )
    .await?;
    Ok(())
}

/// Where the answer to forwarded run `run` goes (`None`: this install forwarded no such run).
pub async fn reply_to(client: &Client, run: RunId) -> Result<Option<ReplyTo>, DbError> {
    let row = client
        .query_opt(
            &crate::stmt(
                client,
                "SELECT reply_to FROM proxied_messages WHERE run_id = $1",
            )
            .await?,
            &[&run.as_uuid()],
        )
        .await?;
    row.map(|r| serde_json::from_value(r.get(0)).map_err(|e| DbError::Invalid(e.to_string())))
        .transpose()
}
