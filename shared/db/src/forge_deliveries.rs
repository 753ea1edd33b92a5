//! Forge wakes already taken (`forge_deliveries`, docs/agents.md, "Hermes as a Forge
//! agent"): a Forge keeps `X-Forge-Delivery` on every retry of one wake, so the id is
//! claimed before the wake is queued and a retry finds it and queues nothing. The claim also
//! holds what the wake's signature covers: a captured wake replayed under another delivery id
//! (which no signature covers) finds that taken and is refused. A claim whose publish failed
//! is released, so the Forge's retry is taken. Rows older than
//! `HERMES_RETENTION_FORGE_DELIVERIES_DAYS` are swept (`retention.rs`).

use hermes_types::ids::RunId;

use super::{Client, DbError};

/// What a claim found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Nothing: the wake is new and now claimed.
    New,
    /// Its delivery id was taken before (a Forge's retry), as this run.
    Retry(RunId),
    /// Its signed content was taken under another delivery id: a replay.
    Replay,
    /// The claim it conflicted with was released meanwhile (that wake was not queued): the
    /// Forge should retry.
    Released,
}

/// Claim `delivery_id`, whose signature covers `covered`, for `run`.
pub async fn claim(
    client: &Client,
    delivery_id: &str,
    covered: &[u8],
    profile_key: &str,
    run: RunId,
) -> Result<Claim, DbError> {
    let n = client
        .execute(
            &crate::stmt(
                client,
                "INSERT INTO forge_deliveries (delivery_id, covered, profile_key, run_id)
                 VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            )
            .await?,
            &[&delivery_id, &covered, &profile_key, &run.as_uuid()],
        )
        .await?;
    if n == 1 {
        return Ok(Claim::New);
    }
    let rows = client
        .query(
            "SELECT delivery_id, run_id FROM forge_deliveries
             WHERE delivery_id = $1 OR covered = $2",
            &[&delivery_id, &covered],
        )
        .await?;
    let retried = rows
        .iter()
        .find(|r| r.get::<_, &str>(0) == delivery_id)
        .map(|r| RunId::from(r.get::<_, uuid::Uuid>(1)));
    Ok(match (retried, rows.is_empty()) {
        (Some(run), _) => Claim::Retry(run),
        (None, true) => Claim::Released,
        (None, false) => Claim::Replay,
    })
}

/// Give back the claim of `run` on `delivery_id` (its wake could not be queued), so the
/// Forge's retry is not taken for a replay.
pub async fn release(client: &Client, delivery_id: &str, run: RunId) -> Result<(), DbError> {
    client
        .execute(
            "DELETE FROM forge_deliveries WHERE delivery_id = $1 AND run_id = $2",
            &[&delivery_id, &run.as_uuid()],
        )
        .await?;
    Ok(())
}
