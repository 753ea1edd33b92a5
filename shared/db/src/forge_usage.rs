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

/// A workspace's own daily limits of its Forge runs (`hermes workspaces set --daily-tokens
/// --daily-usd`): `None` leaves the install's `HERMES_FORGE_DAILY_*`, 0 is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkspaceLimits {
    pub daily_tokens: Option<u64>,
    pub daily_micro_usd: Option<u64>,
}

/// What `workspace`'s Forge runs used on `day` (zero when nothing), and its own limits.
pub async fn used(
    c: &impl GenericClient,
    workspace: WorkspaceId,
    day: NaiveDate,
) -> Result<(ForgeUsed, WorkspaceLimits), DbError> {
    let row = c
        .query_opt(
            &stmt(
                c,
                "SELECT coalesce(u.tokens, 0), coalesce(u.micro_usd, 0), w.daily_tokens,
                        w.daily_micro_usd
                 FROM workspaces w
                 LEFT JOIN llm_forge_usage u ON u.workspace_id = w.id AND u.day = $2
                 WHERE w.id = $1",
            )
            .await?,
            &[&workspace, &day],
        )
        .await?;
    let amount = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(row.map_or_else(Default::default, |r| {
        (
            ForgeUsed {
                tokens: amount(r.get(0)),
                micro_usd: amount(r.get(1)),
            },
            WorkspaceLimits {
                daily_tokens: r.get::<_, Option<i64>>(2).map(amount),
                daily_micro_usd: r.get::<_, Option<i64>>(3).map(amount),
            },
        )
    }))
}
