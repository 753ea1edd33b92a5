//! The platform-wide gate (docs/models-and-budgets.md, the gateway; docs/operations.md, the
//! killswitch):
//!
//! - **Global daily spend cap** (`LLM_GLOBAL_DAILY_BUDGET_USD`): every call's cost is added to
//!   the UTC day's row in PostgreSQL and to `{ns}:llm:spend:{YYYY-MM-DD}` in Redis, integer
//!   micro-dollars (money is never summed in floats); at or above the cap every call is
//!   refused until midnight. Redis down → the spend is read from PostgreSQL; only when
//!   neither answers do calls go through (fail **open**, counted in
//!   `hermes_llm_budget_fail_open_total` and logged): an outage must not stop the product.
//! - **Killswitch** (`hermes killswitch on|off|status`): written to PostgreSQL first, then to
//!   Redis, where `{ns}:llm:killswitch` (on) and `{ns}:llm:killswitch:known` (Redis has been
//!   told the state) are read with the spend in one round trip. Redis without the marker (a
//!   restart) is re-seeded from PostgreSQL; Redis down → PostgreSQL is read at most once a
//!   second per process; neither readable → the last state this process saw, so an on
//!   killswitch stays on.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDate, Utc};
use hermes_cache::CacheError;
use hermes_db::DbError;
use hermes_db::budgets::{self as ledger, KillswitchOn};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use super::money::{micro_to_dollars, micro_to_usd, spent_micro};
use super::{Budgets, DAY_SECS, Fallback, Refusal, scripts};

/// How long a killswitch and spend read from PostgreSQL is reused while Redis is down.
const MEMO_TTL: Duration = Duration::from_secs(1);

/// The killswitch as stored: who turned it on, when and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Killswitch {
    pub on_since: DateTime<Utc>,
    pub reason: String,
}

/// Today's platform-wide state, for `hermes killswitch status`.
#[derive(Debug)]
pub struct SpendStatus {
    pub killswitch: Option<Killswitch>,
    pub spent_today_usd: f64,
    pub cap_micro_usd: Option<u64>,
}

/// Why the killswitch could not be changed or read everywhere it lives.
#[derive(Debug, thiserror::Error)]
pub enum KillswitchError {
    #[error("PostgreSQL: {0}")]
    Db(#[from] DbError),
    #[error("Redis: {0}")]
    Cache(#[from] CacheError),
    #[error("stored killswitch is not valid: {0}")]
    Decode(#[from] serde_json::Error),
}

/// The killswitch and the day's spend as PostgreSQL last said.
pub(super) struct Memo {
    read_at: Instant,
    day: NaiveDate,
    killswitch: Option<Killswitch>,
    spent: u64,
}

impl From<KillswitchOn> for Killswitch {
    fn from(k: KillswitchOn) -> Self {
        Killswitch {
            on_since: k.since,
            reason: k.reason,
        }
    }
}

impl Budgets {
    fn spend_key(&self, day: NaiveDate) -> String {
        self.cache
            .key(format_args!("llm:spend:{}", day.format("%Y-%m-%d")))
    }

    fn killswitch_key(&self) -> String {
        self.cache.key("llm:killswitch")
    }

    fn known_key(&self) -> String {
        self.cache.key("llm:killswitch:known")
    }

    /// The killswitch and the day's spend from PostgreSQL (`None` without a database).
    async fn ledger_global(
        &self,
        day: NaiveDate,
    ) -> Result<Option<(Option<Killswitch>, u64)>, DbError> {
        let Some(db) = &self.db else {
            return Ok(None);
        };
        let c = db.get().await?;
        let killswitch = ledger::killswitch(&c).await?.map(Killswitch::from);
        let spent = ledger::spend(&c, day).await?;
        Ok(Some((killswitch, spent)))
    }

    /// [`Budgets::ledger_global`], reused for [`MEMO_TTL`] so an outage of Redis does not
    /// put a query on every call.
    async fn ledger_global_memo(&self, day: NaiveDate) -> Option<(Option<Killswitch>, u64)> {
        if let Some(m) = self.memo.lock().expect("memo").as_ref()
            && m.day == day
            && m.read_at.elapsed() < MEMO_TTL
        {
            return Some((m.killswitch.clone(), m.spent));
        }
        match self.ledger_global(day).await {
            Ok(Some((killswitch, spent))) => {
                *self.memo.lock().expect("memo") = Some(Memo {
                    read_at: Instant::now(),
                    day,
                    killswitch: killswitch.clone(),
                    spent,
                });
                Some((killswitch, spent))
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "killswitch and spend unreadable in PostgreSQL too");
                None
            }
        }
    }

    /// Redis has forgotten the killswitch or the day's spend (a restart, a new day): tell it
    /// what PostgreSQL says, and answer that.
    async fn seed_global(&self, day: NaiveDate) -> Option<(Option<Killswitch>, u64)> {
        // Read afresh, not from the memo: the seed stays in Redis for the rest of the day.
        let (killswitch, spent) = match self.ledger_global(day).await {
            Ok(read) => read?,
            Err(e) => {
                tracing::warn!(error = %e, "killswitch and spend unreadable in PostgreSQL");
                return None;
            }
        };
        self.fell_back(Fallback::Killswitch);
        let mut pipe = redis::pipe();
        match &killswitch {
            Some(k) => pipe.set(self.killswitch_key(), serde_json::to_string(k).ok()?),
            None => pipe.del(self.killswitch_key()),
        };
        pipe.set(self.known_key(), 1)
            .cmd("SET")
            .arg(self.spend_key(day))
            .arg(spent)
            .arg("NX")
            .arg("EX")
            .arg(2 * DAY_SECS);
        let mut c = self.cache.conn();
        if let Err(e) = pipe.query_async::<()>(&mut c).await {
            self.cache.failed("llm_killswitch_seed", e);
        }
        Some((killswitch, spent))
    }

    /// May any model call start now? Killswitch and cap are read from Redis in one round
    /// trip, from PostgreSQL when Redis fails or has forgotten; with neither readable the
    /// killswitch keeps its last known state and the cap lets the call through (counted).
    pub async fn check_global(&self) -> Result<(), Refusal> {
        let day = Utc::now().date_naive();
        let mut c = self.cache.conn();
        let keys = [self.killswitch_key(), self.known_key(), self.spend_key(day)];
        let read: Result<(Option<String>, Option<String>, Option<String>), _> = c.mget(&keys).await;
        let (on, spent) = match read {
            Ok((Some(_), _, spent)) => (true, spent.as_deref().and_then(spent_micro)),
            Ok((None, known, spent))
                if self.db.is_some() && (known.is_none() || spent.is_none()) =>
            {
                match self.seed_global(day).await {
                    Some((killswitch, spent)) => (killswitch.is_some(), Some(spent)),
                    None if known.is_none() => (
                        self.last_on.load(Ordering::Acquire),
                        spent.as_deref().and_then(spent_micro),
                    ),
                    None => (false, spent.as_deref().and_then(spent_micro)),
                }
            }
            Ok((None, _, spent)) => (
                false,
                Some(spent.as_deref().and_then(spent_micro).unwrap_or(0)),
            ),
            Err(e) => {
                let e = self.cache.failed("llm_global_check", e);
                match self.ledger_global_memo(day).await {
                    Some((killswitch, spent)) => {
                        self.fell_back(Fallback::Killswitch);
                        (killswitch.is_some(), Some(spent))
                    }
                    None => {
                        tracing::warn!(error = %e, "killswitch and spend unreadable; keeping the last known killswitch");
                        (self.last_on.load(Ordering::Acquire), None)
                    }
                }
            }
        };
        self.last_on.store(on, Ordering::Release);
        if on {
            return Err(Refusal::Killswitch);
        }
        let Some(spent) = spent else {
            self.metrics.budgets.fail_open.inc();
            tracing::warn!("global spend cap unreadable; letting the call through (fail open)");
            return Ok(());
        };
        self.metrics
            .budgets
            .spend_today
            .set(micro_to_dollars(spent));
        match self.cap_micro_usd {
            Some(cap) if spent >= cap => Err(Refusal::GlobalCap),
            _ => Ok(()),
        }
    }

    /// Add a call's cost to today's platform spend: PostgreSQL (the truth), then Redis.
    pub async fn add_spend(&self, cost_micro_usd: u64) {
        if cost_micro_usd == 0 {
            return;
        }
        let day = Utc::now().date_naive();
        let mut total = cost_micro_usd;
        let mut durable = false;
        if let Some(db) = &self.db {
            let added = async { ledger::add_spend(&db.get().await?, day, cost_micro_usd).await };
            match added.await {
                Ok(t) => (total, durable) = (t, true),
                Err(e) => {
                    let cost_usd = micro_to_usd(cost_micro_usd);
                    tracing::error!(error = %e, %cost_usd, "spend not recorded in PostgreSQL");
                }
            }
        }
        let mut c = self.cache.conn();
        let done: Result<u64, _> = scripts::ADD_SPEND
            .key(self.spend_key(day))
            .arg(cost_micro_usd)
            .arg(2 * DAY_SECS)
            .arg(total)
            .invoke_async(&mut c)
            .await;
        match done {
            Ok(total_micro_usd) => {
                self.metrics
                    .budgets
                    .spend_today
                    .set(micro_to_dollars(total_micro_usd));
                if self.spend_stale.swap(false, Ordering::AcqRel) {
                    self.raise_spend(day).await;
                }
            }
            Err(e) => {
                let e = self.cache.failed("llm_spend_add", e);
                if durable {
                    self.fell_back(Fallback::Spend);
                    self.spend_stale.store(true, Ordering::Release);
                    self.metrics
                        .budgets
                        .spend_today
                        .set(micro_to_dollars(total));
                } else {
                    self.metrics.budgets.fail_open.inc();
                    let cost_usd = micro_to_usd(cost_micro_usd);
                    tracing::warn!(error = %e, %cost_usd, "spend not recorded in the global counter");
                }
            }
        }
    }

    /// Raise today's spend in Redis to PostgreSQL's total (costs this process recorded only
    /// in PostgreSQL while Redis was away); on failure, try again after the next cost.
    async fn raise_spend(&self, day: NaiveDate) {
        let Ok(Some((_, total))) = self.ledger_global(day).await else {
            self.spend_stale.store(true, Ordering::Release);
            return;
        };
        let mut c = self.cache.conn();
        let raised: Result<i64, _> = scripts::RAISE_SPEND
            .key(self.spend_key(day))
            .arg(total)
            .arg(2 * DAY_SECS)
            .invoke_async(&mut c)
            .await;
        if let Err(e) = raised {
            self.cache.failed("llm_spend_add", e);
            self.spend_stale.store(true, Ordering::Release);
        }
    }

    /// Turn the killswitch on: PostgreSQL first (it survives a Redis restart), then Redis
    /// (every replica sees it on its next call). Redis is written even when PostgreSQL fails,
    /// so the fleet stops now; the error says what is missing.
    pub async fn killswitch_on(&self, reason: &str) -> Result<(), KillswitchError> {
        let k = Killswitch {
            on_since: Utc::now(),
            reason: reason.to_string(),
        };
        let durable = match &self.db {
            Some(db) => {
                let on = KillswitchOn {
                    since: k.on_since,
                    reason: k.reason.clone(),
                };
                async { ledger::killswitch_on(&db.get().await?, &on).await }.await
            }
            None => Ok(()),
        };
        self.last_on.store(true, Ordering::Release);
        *self.memo.lock().expect("memo") = None;
        let value = serde_json::to_string(&k)?;
        let mut c = self.cache.conn();
        let cached = redis::pipe()
            .atomic()
            .set(self.killswitch_key(), value)
            .set(self.known_key(), 1)
            .query_async::<()>(&mut c)
            .await
            .map_err(|e| self.cache.failed("llm_killswitch", e));
        durable?;
        cached?;
        tracing::warn!(reason, "killswitch on: every model call is blocked");
        Ok(())
    }

    /// Turn the killswitch off; true if it was on. PostgreSQL first: when it cannot be
    /// written nothing changes (Redis alone would turn on again after a restart).
    pub async fn killswitch_off(&self) -> Result<bool, KillswitchError> {
        let durable_was = match &self.db {
            Some(db) => Some(async { ledger::killswitch_off(&db.get().await?).await }.await?),
            None => None,
        };
        *self.memo.lock().expect("memo") = None;
        let mut c = self.cache.conn();
        let (n, ()): (i64, ()) = redis::pipe()
            .atomic()
            .del(self.killswitch_key())
            .set(self.known_key(), 1)
            .query_async(&mut c)
            .await
            .map_err(|e| self.cache.failed("llm_killswitch", e))?;
        self.last_on.store(false, Ordering::Release);
        let was = durable_was.unwrap_or(false) || n > 0;
        if was {
            tracing::warn!("killswitch off: model calls resume");
        }
        Ok(was)
    }

    /// The killswitch and today's spend: from Redis, else from PostgreSQL.
    pub async fn status(&self) -> Result<SpendStatus, KillswitchError> {
        let day = Utc::now().date_naive();
        let mut c = self.cache.conn();
        let keys = [self.killswitch_key(), self.known_key(), self.spend_key(day)];
        let read: Result<(Option<String>, Option<String>, Option<String>), _> = c.mget(&keys).await;
        let redis_error = match read {
            Ok((ks, known, spent))
                if self.db.is_none() || (known.is_some() && spent.is_some()) || ks.is_some() =>
            {
                return Ok(SpendStatus {
                    killswitch: ks.map(|s| serde_json::from_str(&s)).transpose()?,
                    spent_today_usd: micro_to_dollars(
                        spent.as_deref().and_then(spent_micro).unwrap_or(0),
                    ),
                    cap_micro_usd: self.cap_micro_usd,
                });
            }
            Ok(_) => None,
            Err(e) => Some(self.cache.failed("llm_killswitch", e)),
        };
        match self.ledger_global(day).await {
            Ok(Some((killswitch, spent))) => {
                self.fell_back(Fallback::Killswitch);
                Ok(SpendStatus {
                    killswitch,
                    spent_today_usd: micro_to_dollars(spent),
                    cap_micro_usd: self.cap_micro_usd,
                })
            }
            Ok(None) => Err(redis_error
                .expect("without a database Redis answered or failed")
                .into()),
            Err(e) => Err(e.into()),
        }
    }
}
