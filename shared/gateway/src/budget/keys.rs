//! Budgets of API keys (docs/models-and-budgets.md, API keys): a key's daily and monthly
//! tokens and dollars, counted over every model call made for its messages on either surface.
//! Checked before a call against the usage PostgreSQL has settled, and added after it in one
//! atomic statement. Unlike a user's tokens there is no hold: calls of one key in flight at
//! the same moment may together pass a limit by what they cost, and the next call is refused.
//! A key with no budget costs no read at all; its limits are cached for [`LIMITS_TTL`], so a
//! change made with `hermes api-keys set` applies within that.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use hermes_db::api_keys::{self, KeyLimits};
use hermes_db::budgets::{self as ledger, KeyUsed};
use hermes_db::{Db, DbError};
use hermes_types::ids::ApiKeyId;
use hermes_types::model::Usage;
use hermes_types::ttl_cache::TtlCache;

use super::Refusal;

/// How long a key's limits are trusted before they are read again.
pub const LIMITS_TTL: Duration = Duration::from_secs(30);

/// Keys whose limits are remembered at once.
const KEYS_CACHED: usize = 10_000;

/// The budgets of API keys, in PostgreSQL.
#[derive(Clone)]
pub struct KeyBudgets {
    db: Option<Db>,
    limits: Arc<TtlCache<ApiKeyId, KeyLimits>>,
}

/// Which of `limits` `used` has reached, if any.
fn over(limits: &KeyLimits, used: &KeyUsed) -> Option<Refusal> {
    let reached = |limit: Option<u64>, used: u64| limit.is_some_and(|l| used >= l);
    if reached(limits.daily_tokens, used.day_tokens)
        || reached(limits.daily_micro_usd, used.day_micro_usd)
    {
        return Some(Refusal::KeyDaily);
    }
    if reached(limits.monthly_tokens, used.month_tokens)
        || reached(limits.monthly_micro_usd, used.month_micro_usd)
    {
        return Some(Refusal::KeyMonthly);
    }
    None
}

impl KeyBudgets {
    pub fn new(db: Option<Db>) -> Self {
        Self {
            db,
            limits: Arc::new(TtlCache::new(LIMITS_TTL, KEYS_CACHED)),
        }
    }

    async fn limits(&self, db: &Db, key: ApiKeyId) -> Result<KeyLimits, DbError> {
        if let Some(l) = self.limits.get(&key) {
            return Ok(l);
        }
        // A key deleted since its message was accepted has no limits left to keep.
        let limits = api_keys::get(&db.get().await?, key)
            .await?
            .map(|k| k.limits)
            .unwrap_or_default();
        self.limits.insert(key, limits);
        Ok(limits)
    }

    /// May a call be made for `key`? `Ok(true)` when the key has a budget, so the call's
    /// usage must be [settled](Self::settle); refused (fail closed) when the key has a budget
    /// and PostgreSQL cannot be read.
    pub async fn check(&self, key: ApiKeyId) -> Result<bool, Refusal> {
        let Some(db) = &self.db else {
            return Ok(false);
        };
        let unreadable = |e: DbError| {
            tracing::warn!(%key, error = %e, "key budget unreadable; refusing the call (fail closed)");
            Refusal::BudgetUnavailable
        };
        let limits = self.limits(db, key).await.map_err(unreadable)?;
        if !limits.has_budget() {
            return Ok(false);
        }
        let used = async { ledger::key_used(&db.get().await?, key, Utc::now().date_naive()).await }
            .await
            .map_err(unreadable)?;
        match over(&limits, &used) {
            Some(refusal) => Err(refusal),
            None => Ok(true),
        }
    }

    /// Add a call's `usage` to `key`'s day and month.
    pub async fn settle(&self, key: ApiKeyId, usage: Usage) {
        let (Some(db), tokens) = (&self.db, usage.total()) else {
            return;
        };
        if tokens == 0 && usage.cost_micro_usd == 0 {
            return;
        }
        let day = Utc::now().date_naive();
        let added = async {
            ledger::add_key_usage(&db.get().await?, key, day, tokens, usage.cost_micro_usd).await
        };
        if let Err(e) = added.await {
            tracing::error!(%key, tokens, micro_usd = usage.cost_micro_usd, error = %e,
                "key usage not recorded; its budget does not count this call");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_limit_reached_refuses() {
        let limits = KeyLimits {
            daily_tokens: Some(100),
            monthly_micro_usd: Some(5_000),
            ..KeyLimits::default()
        };
        let used = |day_tokens, month_micro_usd| KeyUsed {
            day_tokens,
            month_tokens: day_tokens,
            day_micro_usd: month_micro_usd,
            month_micro_usd,
        };
        assert_eq!(over(&limits, &used(99, 4_999)), None);
        assert_eq!(over(&limits, &used(100, 0)), Some(Refusal::KeyDaily));
        assert_eq!(over(&limits, &used(0, 5_000)), Some(Refusal::KeyMonthly));
        assert_eq!(over(&KeyLimits::default(), &used(u64::MAX, u64::MAX)), None);
    }
}
