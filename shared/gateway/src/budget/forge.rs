//! The daily budget of each workspace's Forge runs (docs/models-and-budgets.md, "Forge
//! runs"): a Forge's wake has no user and no API key to meter, so the tokens and dollars of
//! every model call of its run's tool loop count against its workspace, per UTC day, up to
//! `HERMES_FORGE_DAILY_TOKENS` and `HERMES_FORGE_DAILY_USD`, or the workspace's own limits
//! (`hermes workspaces set --daily-tokens --daily-usd`). Checked before a call against
//! what PostgreSQL has settled, added after it in one atomic statement; as for API keys there
//! is no hold, so calls in flight at once may together pass the limit by what they cost, and
//! the next call is refused. PostgreSQL unreadable refuses the call (fail closed).

use chrono::Utc;
use hermes_config::ForgeBudget;
use hermes_db::forge_usage::{self, ForgeUsed, WorkspaceLimits};
use hermes_db::{Db, DbError};
use hermes_types::ids::WorkspaceId;
use hermes_types::model::Usage;

use super::Refusal;

/// The Forge budgets of the workspaces, in PostgreSQL.
#[derive(Clone)]
pub struct ForgeBudgets {
    db: Option<Db>,
    budget: ForgeBudget,
}

/// The budget of a workspace: its own limits where it has them (0: none), else the install's.
fn effective(install: &ForgeBudget, own: &WorkspaceLimits) -> ForgeBudget {
    let pick = |own: Option<u64>, install: Option<u64>| match own {
        Some(0) => None,
        Some(n) => Some(n),
        None => install,
    };
    ForgeBudget {
        daily_tokens: pick(own.daily_tokens, install.daily_tokens),
        daily_micro_usd: pick(own.daily_micro_usd, install.daily_micro_usd),
    }
}

/// Whether `used` has reached a limit of `budget`.
fn over(budget: &ForgeBudget, used: &ForgeUsed) -> bool {
    budget.daily_tokens.is_some_and(|l| used.tokens >= l)
        || budget.daily_micro_usd.is_some_and(|l| used.micro_usd >= l)
}

impl ForgeBudgets {
    pub fn new(db: Option<Db>, budget: ForgeBudget) -> Self {
        Self { db, budget }
    }

    /// May a call be made for a Forge run of `workspace`? `Ok(true)` when its usage must be
    /// [settled](Self::settle).
    pub async fn check(&self, workspace: WorkspaceId) -> Result<bool, Refusal> {
        // Read even when the install sets no limit: the workspace may set its own.
        let Some(db) = self.db.as_ref() else {
            return Ok(false);
        };
        let used = async { forge_usage::used(&db.get().await?, workspace, Utc::now().date_naive()).await }
            .await
            .map_err(|e: DbError| {
                tracing::warn!(%workspace, error = %e, "Forge budget unreadable; refusing the call (fail closed)");
                Refusal::BudgetUnavailable
            })?;
        let (used, own) = used;
        let budget = effective(&self.budget, &own);
        if over(&budget, &used) {
            return Err(Refusal::ForgeDaily);
        }
        Ok(budget.is_limited())
    }

    /// Add a call's `usage` to `workspace`'s day.
    pub async fn settle(&self, workspace: WorkspaceId, usage: Usage) {
        let (Some(db), tokens) = (&self.db, usage.total()) else {
            return;
        };
        if tokens == 0 && usage.cost_micro_usd == 0 {
            return;
        }
        let day = Utc::now().date_naive();
        let added = async {
            forge_usage::add(
                &db.get().await?,
                workspace,
                day,
                tokens,
                usage.cost_micro_usd,
            )
            .await
        };
        if let Err(e) = added.await {
            tracing::error!(%workspace, tokens, micro_usd = usage.cost_micro_usd, error = %e,
                "Forge usage not recorded; the workspace's budget does not count this call");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_limit_reached_refuses_and_no_limit_never_does() {
        let budget = ForgeBudget {
            daily_tokens: Some(1_000),
            daily_micro_usd: Some(500),
        };
        let used = |tokens, micro_usd| ForgeUsed { tokens, micro_usd };
        assert!(!over(&budget, &used(999, 499)));
        assert!(over(&budget, &used(1_000, 0)));
        assert!(over(&budget, &used(0, 500)));
        assert!(!over(&ForgeBudget::default(), &used(u64::MAX, u64::MAX)));
    }

    #[test]
    fn a_workspace_limit_overrides_the_installs_and_zero_lifts_it() {
        let install = ForgeBudget {
            daily_tokens: Some(1_000),
            daily_micro_usd: None,
        };
        let own = WorkspaceLimits {
            daily_tokens: Some(0),
            daily_micro_usd: Some(7),
        };
        let b = effective(&install, &own);
        assert_eq!((b.daily_tokens, b.daily_micro_usd), (None, Some(7)));
        assert_eq!(effective(&install, &WorkspaceLimits::default()), install);
    }
}
