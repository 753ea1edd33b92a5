//! What the Forge runs of each workspace used per UTC day (`llm_forge_usage`, migration
//! `0023_forge_hardening.sql`; docs/models-and-budgets.md, "Forge runs"): tokens and integer
//! micro-dollars, added after each model call in one atomic statement, read before the next.

use chrono::NaiveDate;
use hermes_types::ids::WorkspaceId;

use super::{DbError, GenericClient, stmt};

/// A workspace's Forge usage on one day.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForgeUsed {
    pub tokens: u64,
    pub micro_usd: u64,
}

fn to_i64(n: u64) -> Result<i64, DbError> {
    i64::try_from(n).map_err(|_| DbError::Invalid(format!("amount {n} out of range")))
}

/// Add one call's `tokens` and `micro_usd` to `workspace`'s `day`.
pub async fn add(
    c: &impl GenericClient,
    workspace: WorkspaceId,
    day: NaiveDate,
    tokens: u64,
    micro_usd: u64,
) -> Result<(), DbError> {
    c.execute(
        &stmt(
            c,
            "INSERT INTO llm_forge_usage (workspace_id, day, tokens, micro_usd)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (workspace_id, day)
             DO UPDATE SET tokens = llm_forge_usage.tokens + EXCLUDED.tokens,
                           micro_usd = llm_forge_usage.micro_usd + EXCLUDED.micro_usd,
                           updated_at = now()",
        )
        .await?,
        &[&workspace, &day, &to_i64(tokens)?, &to_i64(micro_usd)?],
    )
    .await?;
    Ok(())
}

/// What `workspace`'s Forge runs used on `day` (zero when nothing).
pub async fn used(
    c: &impl GenericClient,
    workspace: WorkspaceId,
    day: NaiveDate,
) -> Result<ForgeUsed, DbError> {
    let row = c
        .query_opt(
            &stmt(
                c,
                "SELECT tokens, micro_usd FROM llm_forge_usage WHERE workspace_id = $1 AND day = $2",
            )
            .await?,
            &[&workspace, &day],
        )
        .await?;
    Ok(row.map_or_else(ForgeUsed::default, |r| ForgeUsed {
        tokens: u64::try_from(r.get::<_, i64>(0)).unwrap_or(0),
        micro_usd: u64::try_from(r.get::<_, i64>(1)).unwrap_or(0),
    }))
}
