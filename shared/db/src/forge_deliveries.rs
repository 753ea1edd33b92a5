//! Forge wakes already taken (`forge_deliveries`, docs/agents.md, "Hermes as a Forge
//! agent"): a Forge keeps `X-Forge-Delivery` on every retry of one wake, so the id is
//! claimed before the wake is queued and a replay finds it and queues nothing. A claim whose
//! publish failed is released, so the Forge's retry is taken. Rows older than
//! `HERMES_RETENTION_FORGE_DELIVERIES_DAYS` are swept (`retention.rs`).

use hermes_types::ids::RunId;

use super::{Client, DbError};

/// Claim `delivery_id` for `run`: true when it is new, false when a wake of that id was
/// taken before (a replay or a concurrent retry).
pub async fn claim(
    client: &Client,
    delivery_id: &str,
    profile_key: &str,
    run: RunId,
) -> Result<bool, DbError> {
    let n = client
        .execute(
            &crate::stmt(
                client,
                "INSERT INTO forge_deliveries (delivery_id, profile_key, run_id)
                 VALUES ($1, $2, $3) ON CONFLICT (delivery_id) DO NOTHING",
            )
            .await?,
            &[&delivery_id, &profile_key, &run.as_uuid()],
        )
        .await?;
    Ok(n == 1)
}

/// The run a taken delivery id was queued as.
pub async fn run_of(client: &Client, delivery_id: &str) -> Result<Option<RunId>, DbError> {
    let row = client
        .query_opt(
            "SELECT run_id FROM forge_deliveries WHERE delivery_id = $1",
            &[&delivery_id],
        )
        .await?;
    Ok(row.map(|r| RunId::from(r.get::<_, uuid::Uuid>(0))))
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
