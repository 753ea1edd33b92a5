//! Spending limits at the one chokepoint every model call passes (docs/models-and-budgets.md,
//! the gateway, and where budgets live). Money is not what may be lost: usage, spend and the
//! killswitch are kept durably in PostgreSQL (`hermes_db::budgets`), Redis is the fast path.
//!
//! - **Per-user token budgets** (daily and monthly, by tier): a call holds its worst case
//!   (estimated input + output cap) before it starts, atomically against both windows in
//!   one Lua script, and settles at the real usage after (written to PostgreSQL, then to
//!   Redis); a failed call releases its hold. A hold is leased: one whose release never
//!   arrives (a killed process, a release that failed) stops counting when its lease ends.
//!   Redis down or forgetful → the windows are read from PostgreSQL and the hold is kept in
//!   this process ([`local`]); only when neither can be read is the call refused (fail
//!   **closed**).
//! - **Global daily spend cap** and the **killswitch**: see [`global`].
//! - **API keys' budgets** (tokens and dollars, daily and monthly): see [`keys`].

mod forge;
mod global;
mod keys;
mod local;
mod money;
mod scripts;

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{NaiveDate, Utc};
use hermes_cache::Cache;
use hermes_config::{Config, TierBudget};
use hermes_db::budgets::{self as ledger, TokensUsed};
use hermes_db::{Db, DbError};
use hermes_telemetry::Metrics;
use hermes_types::ids::UserId;
use uuid::Uuid;

pub use forge::ForgeBudgets;
pub use global::{Killswitch, KillswitchError, SpendStatus};
pub use keys::KeyBudgets;
pub use money::estimate_tokens;

/// Which limit refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    UserDaily,
    UserMonthly,
    /// Per-user budgets could be read neither from Redis nor from PostgreSQL (fail closed).
    BudgetUnavailable,
    GlobalCap,
    Killswitch,
    /// The API key's daily tokens or dollars are spent.
    KeyDaily,
    /// The API key's monthly tokens or dollars are spent.
    KeyMonthly,
    /// The day's tokens or dollars of the workspace's Forge runs are spent.
    ForgeDaily,
}

impl Refusal {
    /// Every scope, for starting the rejection counters at 0.
    pub const ALL: [Refusal; 8] = [
        Refusal::UserDaily,
        Refusal::UserMonthly,
        Refusal::BudgetUnavailable,
        Refusal::GlobalCap,
        Refusal::Killswitch,
        Refusal::KeyDaily,
        Refusal::KeyMonthly,
        Refusal::ForgeDaily,
    ];

    /// The `scope` label of `hermes_llm_budget_rejections_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::UserDaily => "user_daily",
            Refusal::UserMonthly => "user_monthly",
            Refusal::BudgetUnavailable => "budget_unavailable",
            Refusal::GlobalCap => "global_cap",
            Refusal::Killswitch => "killswitch",
            Refusal::KeyDaily => "key_daily",
            Refusal::KeyMonthly => "key_monthly",
            Refusal::ForgeDaily => "forge_daily",
        }
    }
}

/// What a PostgreSQL fallback served, the `what` label of `hermes_budget_fallback_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// A reservation checked against PostgreSQL (Redis unreadable).
    Reserve,
    /// A window Redis had forgotten, seeded from PostgreSQL.
    Seed,
    /// A settle that reached PostgreSQL but not Redis.
    Settle,
    /// Spend that reached PostgreSQL but not Redis.
    Spend,
    /// The killswitch or the day's spend read from PostgreSQL.
    Killswitch,
    /// A user's usage shown from PostgreSQL.
    Used,
}

impl Fallback {
    /// Every label, for starting the counters at 0.
    pub const ALL: [Fallback; 6] = [
        Fallback::Reserve,
        Fallback::Seed,
        Fallback::Settle,
        Fallback::Spend,
        Fallback::Killswitch,
        Fallback::Used,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Fallback::Reserve => "reserve",
            Fallback::Seed => "seed",
            Fallback::Settle => "settle",
            Fallback::Spend => "spend",
            Fallback::Killswitch => "killswitch",
            Fallback::Used => "used",
        }
    }
}

/// Where a reservation's hold lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    /// A leased member of the user's holds in Redis.
    Redis,
    /// In this process, made against PostgreSQL while Redis could not be read.
    Local,
}

/// Tokens held for a call in flight. [`Reservation::settle`] ends it at the real usage; one
/// dropped unsettled (an early return, a `?`, a cancelled or panicking call) releases itself,
/// so a reservation is settled or released exactly once; and a release that never arrives
/// (a killed process) ends with the hold's lease.
#[must_use = "a reservation is released when dropped; settle it at the real usage"]
pub struct Reservation {
    user: UserId,
    /// The UTC day the hold was made: its usage is counted in that day and its month.
    day: NaiveDate,
    hold: Hold,
    /// The hold's member in Redis, `{id}:{tokens}`.
    member: String,
    tokens: u64,
    /// Who ends it; `None` once settled.
    budgets: Option<Budgets>,
}

impl Reservation {
    /// The tokens held.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// End the reservation at the real usage (`0` releases it: failed calls cost nothing).
    pub async fn settle(mut self, used_tokens: u64) {
        if let Some(budgets) = self.budgets.take() {
            budgets.end(&self, used_tokens).await;
        }
    }

    /// Give every held token back.
    pub async fn release(self) {
        self.settle(0).await;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let Some(budgets) = self.budgets.take() else {
            return;
        };
        if self.hold == Hold::Local {
            // In-process: given back here and now, runtime or not.
            budgets.local.release(self.user, self.tokens);
            return;
        }
        // Releasing is Redis work, which Drop cannot await: it runs on its own task.
        let held = Reservation {
            user: self.user,
            day: self.day,
            hold: self.hold,
            member: std::mem::take(&mut self.member),
            tokens: self.tokens,
            budgets: None,
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { budgets.end(&held, 0).await });
            }
            // No runtime (a process shutting down): the hold ends with its lease.
            Err(_) => tracing::warn!(
                tokens = held.tokens,
                "budget reservation dropped outside a runtime; it ends with its lease"
            ),
        }
    }
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("user", &self.user)
            .field("day", &self.day)
            .field("hold", &self.hold)
            .field("tokens", &self.tokens)
            .field("settled", &self.budgets.is_none())
            .finish()
    }
}

/// The limits of one process.
#[derive(Clone)]
pub struct Budgets {
    cache: Cache,
    /// The durable ledger; `None` only for benchmarks and tests built without a database,
    /// which then keep budgets in Redis alone.
    db: Option<Db>,
    metrics: Metrics,
    cap_micro_usd: Option<u64>,
    /// How long a hold counts without being settled: twice the longest call.
    lease: Duration,
    /// Holds made against PostgreSQL while Redis could not be read.
    local: Arc<local::LocalHolds>,
    /// Users whose Redis windows missed a settle of this process (Redis unreachable then):
    /// raised to PostgreSQL's totals before their next reservation.
    stale: Arc<Mutex<HashSet<UserId>>>,
    /// The killswitch as PostgreSQL last said, read at most once a second while Redis is down.
    memo: Arc<Mutex<Option<global::Memo>>>,
    /// A cost of this process reached PostgreSQL but not Redis: the day's key is raised to
    /// PostgreSQL's total after the next cost that reaches Redis.
    spend_stale: Arc<AtomicBool>,
    /// The last killswitch state this process read from anywhere: when neither Redis nor
    /// PostgreSQL can be read, an on killswitch stays on.
    last_on: Arc<AtomicBool>,
}

const DAY_SECS: i64 = 86_400;

impl Budgets {
    /// The budgets of `config`, durable in `db` (docs/models-and-budgets.md, where budgets live).
    pub fn new(cache: Cache, db: Option<Db>, metrics: Metrics, config: &Config) -> Self {
        let cap_micro_usd = config.llm.global_daily_budget_micro_usd;
        if let Some(cap) = cap_micro_usd {
            metrics.set_spend_cap_usd(money::micro_to_dollars(cap));
        }
        for what in Fallback::ALL {
            metrics.budgets.fallback.with_label_values(&[what.as_str()]);
        }
        Self {
            cache,
            db,
            metrics,
            cap_micro_usd,
            lease: 2 * config.llm.call_timeout.max(Duration::from_secs(1)),
            local: Arc::default(),
            stale: Arc::default(),
            memo: Arc::default(),
            spend_stale: Arc::default(),
            last_on: Arc::default(),
        }
    }

    fn fell_back(&self, what: Fallback) {
        self.metrics
            .budgets
            .fallback
            .with_label_values(&[what.as_str()])
            .inc();
    }

    /// `user`'s day, month and holds keys for the day `day`.
    fn keys(&self, user: UserId, day: NaiveDate) -> [String; 3] {
        [
            self.cache.key(format_args!(
                "llm:budget:{user}:d:{}",
                day.format("%Y-%m-%d")
            )),
            self.cache
                .key(format_args!("llm:budget:{user}:m:{}", day.format("%Y-%m"))),
            self.cache.key(format_args!("llm:budget:{user}:held")),
        ]
    }

    /// The settled totals in PostgreSQL (zero without a database).
    async fn ledger_used(&self, user: UserId, day: NaiveDate) -> Result<TokensUsed, DbError> {
        match &self.db {
            Some(db) => ledger::tokens_used(&db.get().await?, user, day).await,
            None => Ok(TokensUsed::default()),
        }
    }

    /// Raise `user`'s Redis windows to PostgreSQL's totals. Redis answering while
    /// PostgreSQL does not, the windows start from zero in Redis and the user is marked
    /// stale, to be raised to the truth once PostgreSQL is back. False when Redis failed.
    async fn seed(&self, user: UserId, day: NaiveDate) -> bool {
        let truth = match self.ledger_used(user, day).await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(%user, error = %e, "budget window not seeded from PostgreSQL; counting from zero");
                self.stale.lock().expect("stale set").insert(user);
                TokensUsed::default()
            }
        };
        let [d, m, _] = self.keys(user, day);
        let mut c = self.cache.conn();
        let seeded: Result<i64, _> = scripts::SEED
            .key(d)
            .key(m)
            .arg(truth.day)
            .arg(truth.month)
            .arg(2 * DAY_SECS)
            .arg(32 * DAY_SECS)
            .invoke_async(&mut c)
            .await;
        match seeded {
            Ok(_) => {
                if self.db.is_some() {
                    self.fell_back(Fallback::Seed);
                }
                true
            }
            Err(e) => {
                self.cache.failed("llm_budget_seed", e);
                false
            }
        }
    }

    /// Reserve `tokens` of `user`'s budget for one call: in Redis when it answers, else
    /// against PostgreSQL; refused (fail closed) only when neither can be read.
    pub async fn reserve(
        &self,
        user: UserId,
        budget: TierBudget,
        tokens: u64,
    ) -> Result<Reservation, Refusal> {
        let day = Utc::now().date_naive();
        let was_stale = self.stale.lock().expect("stale set").remove(&user);
        if was_stale && !self.seed(user, day).await {
            self.stale.lock().expect("stale set").insert(user);
        }
        let member = hold_member(tokens);
        let mut seeded = false;
        loop {
            match self
                .reserve_in_redis(user, day, budget, tokens, &member)
                .await
            {
                Ok(scripts::RESERVED) => {
                    return Ok(Reservation {
                        user,
                        day,
                        hold: Hold::Redis,
                        member,
                        tokens,
                        budgets: Some(self.clone()),
                    });
                }
                Ok(scripts::OVER_DAILY) => return Err(Refusal::UserDaily),
                Ok(scripts::OVER_MONTHLY) => return Err(Refusal::UserMonthly),
                // A window Redis does not have (a new day, or Redis restarted): seed it
                // from PostgreSQL rather than read it as zero, then try again once.
                Ok(scripts::MISSING) if !seeded => {
                    seeded = true;
                    if !self.seed(user, day).await {
                        break;
                    }
                }
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(%user, error = %e, "token budget unreadable in Redis; checking PostgreSQL");
                    break;
                }
            }
        }
        self.reserve_locally(user, day, budget, tokens).await
    }

    /// The [`scripts::RESERVE`] verdict.
    async fn reserve_in_redis(
        &self,
        user: UserId,
        day: NaiveDate,
        budget: TierBudget,
        tokens: u64,
        member: &str,
    ) -> Result<i64, hermes_cache::CacheError> {
        let [d, m, held] = self.keys(user, day);
        let now = Utc::now().timestamp_millis();
        let lease_end = now + i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX / 2);
        let mut c = self.cache.conn();
        scripts::RESERVE
            .key(d)
            .key(m)
            .key(held)
            .arg(tokens)
            .arg(budget.daily_tokens)
            .arg(budget.monthly_tokens)
            .arg(now)
            .arg(member)
            .arg(lease_end)
            .invoke_async(&mut c)
            .await
            .map_err(|e| self.cache.failed("llm_budget_reserve", e))
    }

    /// Reserve against PostgreSQL's settled totals and this process's own holds.
    async fn reserve_locally(
        &self,
        user: UserId,
        day: NaiveDate,
        budget: TierBudget,
        tokens: u64,
    ) -> Result<Reservation, Refusal> {
        let Some(_) = &self.db else {
            tracing::warn!(%user, "token budget unreadable and no database; refusing the call (fail closed)");
            return Err(Refusal::BudgetUnavailable);
        };
        let settled = match self.ledger_used(user, day).await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(%user, error = %e, "token budget unreadable in Redis and PostgreSQL; refusing the call (fail closed)");
                return Err(Refusal::BudgetUnavailable);
            }
        };
        self.fell_back(Fallback::Reserve);
        self.local.hold(user, settled, budget, tokens)?;
        // The settle must raise Redis to the truth once it is back.
        self.stale.lock().expect("stale set").insert(user);
        Ok(Reservation {
            user,
            day,
            hold: Hold::Local,
            member: String::new(),
            tokens,
            budgets: Some(self.clone()),
        })
    }

    /// End a reservation at `used_tokens`: PostgreSQL first (the truth), then Redis.
    async fn end(&self, r: &Reservation, used_tokens: u64) {
        if r.hold == Hold::Local {
            self.local.release(r.user, r.tokens);
        }
        let mut totals = TokensUsed {
            day: used_tokens,
            month: used_tokens,
        };
        if used_tokens > 0
            && let Some(db) = &self.db
        {
            let added =
                async { ledger::add_tokens(&db.get().await?, r.user, r.day, used_tokens).await };
            match added.await {
                Ok(t) => totals = t,
                Err(e) => tracing::error!(user = %r.user, used = used_tokens, error = %e,
                    "token usage not recorded in PostgreSQL; only Redis counts it"),
            }
        }
        if r.hold == Hold::Local && used_tokens == 0 {
            return;
        }
        let [d, m, held] = self.keys(r.user, r.day);
        let mut c = self.cache.conn();
        let done: Result<i64, _> = scripts::SETTLE
            .key(d)
            .key(m)
            .key(held)
            .arg(&r.member)
            .arg(used_tokens)
            .arg(totals.day)
            .arg(totals.month)
            .arg(2 * DAY_SECS)
            .arg(32 * DAY_SECS)
            .invoke_async(&mut c)
            .await;
        if let Err(e) = done {
            // The hold ends with its lease; the usage is in PostgreSQL and raises Redis
            // before this user's next reservation.
            let e = self.cache.failed("llm_budget_settle", e);
            tracing::warn!(error = %e, reserved = r.tokens, used = used_tokens, "budget not settled in Redis");
            if used_tokens > 0 && self.db.is_some() {
                self.fell_back(Fallback::Settle);
                self.stale.lock().expect("stale set").insert(r.user);
            }
        }
    }

    /// Tokens used (or held by calls in flight) by `user` today and this month, for
    /// `hermes users show`: from Redis, else from PostgreSQL (plus this process's holds).
    pub async fn used(&self, user: UserId) -> Result<(u64, u64), BudgetReadError> {
        let day = Utc::now().date_naive();
        let [d, m, held] = self.keys(user, day);
        let mut c = self.cache.conn();
        let read: Result<(Option<u64>, Option<u64>, u64), _> = scripts::USED
            .key(d)
            .key(m)
            .key(held)
            .arg(Utc::now().timestamp_millis())
            .invoke_async(&mut c)
            .await;
        // Held in Redis (when it answered) or in this process.
        let held = match read {
            Ok((Some(d), Some(m), held)) => return Ok((d + held, m + held)),
            Ok((_, _, held)) if self.db.is_none() => return Ok((held, held)),
            Ok((_, _, held)) => held,
            Err(e) if self.db.is_none() => {
                return Err(self.cache.failed("llm_budget_read", e).into());
            }
            Err(e) => {
                self.cache.failed("llm_budget_read", e);
                0
            }
        };
        let t = self.ledger_used(user, day).await?;
        self.fell_back(Fallback::Used);
        let held = held + self.local.held(user);
        Ok((t.day + held, t.month + held))
    }
}

/// A hold's member: unique per reservation, ending in its tokens for the scripts to sum.
fn hold_member(tokens: u64) -> String {
    format!("{}:{tokens}", Uuid::now_v7().simple())
}

/// Why a user's usage could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BudgetReadError {
    #[error(transparent)]
    Db(#[from] DbError),
    #[error(transparent)]
    Cache(#[from] hermes_cache::CacheError),
}
