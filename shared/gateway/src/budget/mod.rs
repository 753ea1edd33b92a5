//! Spending limits at the one chokepoint every model call passes (docs/models-and-budgets.md, the gateway):
//!
//! - **Per-user token budgets** (daily and monthly, by tier): a call reserves its worst case
//!   (estimated input + output cap) before it starts, atomically against both windows in
//!   one Lua script, and reconciles to the real usage after; a failed call releases its
//!   reservation. Redis down → the call is refused (fail **closed**): nobody spends
//!   unmetered.
//! - **Global daily spend cap** (`LLM_GLOBAL_DAILY_BUDGET_USD`): every call's cost is added
//!   with `INCRBY` to a per-UTC-day key, `{ns}:llm:spend:{YYYY-MM-DD}`, holding integer
//!   micro-dollars (money is never summed in floats; dollars appear only at the edges:
//!   gauges, logs, `hermes killswitch status`); at or above the cap every call is refused
//!   until midnight. Redis down → calls go through (fail **open**), counted and logged: an
//!   outage of the cache must not stop the product.
//! - **Killswitch** (`hermes killswitch on|off|status`): one key that blocks every model
//!   call of every replica at once, read together with the spend in one round trip.

use hermes_types::ids::UserId;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use hermes_cache::{Cache, CacheError};
use hermes_config::TierBudget;
use hermes_telemetry::Metrics;
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

/// Reserve `n` tokens against both windows or neither. Returns 1 when reserved, 0 when the
/// daily window would overflow, -1 for the monthly one.
static RESERVE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local n = tonumber(ARGV[1])
local d = tonumber(redis.call('GET', KEYS[1]) or '0')
local m = tonumber(redis.call('GET', KEYS[2]) or '0')
if d + n > tonumber(ARGV[2]) then return 0 end
if m + n > tonumber(ARGV[3]) then return -1 end
redis.call('INCRBY', KEYS[1], n)
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('INCRBY', KEYS[2], n)
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
",
    )
});

/// Add ARGV[1] micro-dollars to today's spend (KEYS[1]), refresh its expiry (ARGV[2]) and
/// return the new total. Builds before the switch to integers kept this key in dollars by
/// `INCRBYFLOAT` ("0.00105"): such a value is read as that old format and rewritten in
/// micro-dollars first, so an upgrade in the middle of a day keeps the day's spend (plain
/// `INCRBY` would refuse the value and stop counting until midnight).
static ADD_SPEND: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
local v = redis.call('GET', KEYS[1])
if v and not string.match(v, '^%d+$') then
  local usd = tonumber(v) or 0
  redis.call('SET', KEYS[1], string.format('%d', math.floor(usd * 1000000 + 0.5)))
end
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return total
",
    )
});

/// Which limit refused a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    UserDaily,
    UserMonthly,
    /// Per-user budgets could not be checked (fail closed).
    BudgetUnavailable,
    GlobalCap,
    Killswitch,
}

impl Refusal {
    /// Every scope, for starting the rejection counters at 0.
    pub const ALL: [Refusal; 5] = [
        Refusal::UserDaily,
        Refusal::UserMonthly,
        Refusal::BudgetUnavailable,
        Refusal::GlobalCap,
        Refusal::Killswitch,
    ];

    /// The `scope` label of `hermes_llm_budget_rejections_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::UserDaily => "user_daily",
            Refusal::UserMonthly => "user_monthly",
            Refusal::BudgetUnavailable => "budget_unavailable",
            Refusal::GlobalCap => "global_cap",
            Refusal::Killswitch => "killswitch",
        }
    }
}

/// Tokens held for a call in flight. [`Reservation::settle`] ends it at the real usage; one
/// dropped unsettled (an early return, a `?`, a cancelled or panicking call) releases itself
/// in a spawned task, so a reservation is never leaked.
#[must_use = "a reservation is released when dropped; settle it at the real usage"]
pub struct Reservation {
    daily_key: String,
    monthly_key: String,
    tokens: u64,
    /// Who gives the tokens back; `None` once settled.
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
            budgets
                .reconcile(&self.daily_key, &self.monthly_key, self.tokens, used_tokens)
                .await;
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
        let (daily, monthly) = (
            std::mem::take(&mut self.daily_key),
            std::mem::take(&mut self.monthly_key),
        );
        let tokens = self.tokens;
        // Releasing is Redis work, which Drop cannot await: it runs on its own task.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { budgets.reconcile(&daily, &monthly, tokens, 0).await });
            }
            // No runtime (a process shutting down): the keys expire with their window, and
            // until then the user is held to the worst case, never more.
            Err(_) => tracing::warn!(
                tokens,
                "budget reservation dropped outside a runtime; not released"
            ),
        }
    }
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("daily_key", &self.daily_key)
            .field("monthly_key", &self.monthly_key)
            .field("tokens", &self.tokens)
            .field("settled", &self.budgets.is_none())
            .finish()
    }
}

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

/// The limits of one process.
#[derive(Clone)]
pub struct Budgets {
    cache: Cache,
    metrics: Metrics,
    cap_micro_usd: Option<u64>,
}

const DAY_SECS: i64 = 86_400;

impl Budgets {
    pub fn new(cache: Cache, metrics: Metrics, cap_micro_usd: Option<u64>) -> Self {
        if let Some(cap) = cap_micro_usd {
            metrics.set_spend_cap_usd(micro_to_dollars(cap));
        }
        Self {
            cache,
            metrics,
            cap_micro_usd,
        }
    }

    fn spend_key(&self, now: DateTime<Utc>) -> String {
        self.cache
            .key(format_args!("llm:spend:{}", now.format("%Y-%m-%d")))
    }

    fn killswitch_key(&self) -> String {
        self.cache.key("llm:killswitch")
    }

    /// May any model call start now? Killswitch and cap are read in one round trip; a
    /// Redis failure lets the call through (counted, logged).
    pub async fn check_global(&self) -> Result<(), Refusal> {
        let mut c = self.cache.conn();
        let keys = [self.killswitch_key(), self.spend_key(Utc::now())];
        let read: Result<(Option<String>, Option<String>), _> = c.mget(&keys).await;
        match read {
            Ok((Some(_), _)) => Err(Refusal::Killswitch),
            Ok((None, spent)) => {
                let spent = spent.as_deref().and_then(spent_micro).unwrap_or(0);
                self.metrics.llm_spend_today.set(micro_to_dollars(spent));
                let over = self.cap_micro_usd.is_some_and(|cap| spent >= cap);
                if over {
                    Err(Refusal::GlobalCap)
                } else {
                    Ok(())
                }
            }
            Err(e) => {
                let e = self.cache.failed("llm_global_check", e);
                self.metrics.llm_budget_fail_open.inc();
                tracing::warn!(error = %e, "global spend cap unreadable; letting the call through (fail open)");
                Ok(())
            }
        }
    }

    /// Add a call's cost to today's platform spend (fail open: counted and logged).
    pub async fn add_spend(&self, cost_micro_usd: u64) {
        if cost_micro_usd == 0 {
            return;
        }
        let mut c = self.cache.conn();
        let done: Result<u64, _> = ADD_SPEND
            .key(self.spend_key(Utc::now()))
            .arg(cost_micro_usd)
            .arg(2 * DAY_SECS)
            .invoke_async(&mut c)
            .await;
        match done {
            Ok(total_micro_usd) => self
                .metrics
                .llm_spend_today
                .set(micro_to_dollars(total_micro_usd)),
            Err(e) => {
                let e = self.cache.failed("llm_spend_add", e);
                self.metrics.llm_budget_fail_open.inc();
                let cost_usd = micro_to_usd(cost_micro_usd);
                tracing::warn!(error = %e, %cost_usd, "spend not recorded in the global counter");
            }
        }
    }

    /// Reserve `tokens` of `user`'s budget for one call (fail closed).
    pub async fn reserve(
        &self,
        user: UserId,
        budget: TierBudget,
        tokens: u64,
    ) -> Result<Reservation, Refusal> {
        let now = Utc::now();
        let daily_key = self.cache.key(format_args!(
            "llm:budget:{user}:d:{}",
            now.format("%Y-%m-%d")
        ));
        let monthly_key = self
            .cache
            .key(format_args!("llm:budget:{user}:m:{}", now.format("%Y-%m")));
        let mut c = self.cache.conn();
        let verdict: Result<i64, _> = RESERVE
            .key(&daily_key)
            .key(&monthly_key)
            .arg(tokens)
            .arg(budget.daily_tokens)
            .arg(budget.monthly_tokens)
            .arg(2 * DAY_SECS)
            .arg(32 * DAY_SECS)
            .invoke_async(&mut c)
            .await;
        match verdict {
            Ok(1) => Ok(Reservation {
                daily_key,
                monthly_key,
                tokens,
                budgets: Some(self.clone()),
            }),
            Ok(0) => Err(Refusal::UserDaily),
            Ok(_) => Err(Refusal::UserMonthly),
            Err(e) => {
                let e = self.cache.failed("llm_budget_reserve", e);
                tracing::warn!(%user, error = %e, "token budget unreadable; refusing the call (fail closed)");
                Err(Refusal::BudgetUnavailable)
            }
        }
    }

    /// Move a reservation of `reserved` tokens to the real usage on both windows.
    async fn reconcile(&self, daily_key: &str, monthly_key: &str, reserved: u64, used_tokens: u64) {
        let delta = used_tokens as i64 - reserved as i64;
        if delta == 0 {
            return;
        }
        let mut c = self.cache.conn();
        let done: Result<(i64, i64), _> = redis::pipe()
            .atomic()
            .incr(daily_key, delta)
            .incr(monthly_key, delta)
            .query_async(&mut c)
            .await;
        if let Err(e) = done {
            // The reservation then stands: the user is held to the worst case, never more.
            let e = self.cache.failed("llm_budget_settle", e);
            tracing::warn!(error = %e, reserved, used = used_tokens, "budget not reconciled");
        }
    }

    /// Turn the killswitch on.
    pub async fn killswitch_on(&self, reason: &str) -> Result<(), CacheError> {
        let value = serde_json::to_string(&Killswitch {
            on_since: Utc::now(),
            reason: reason.to_string(),
        })?;
        let mut c = self.cache.conn();
        let () = c
            .set(self.killswitch_key(), value)
            .await
            .map_err(|e| self.cache.failed("llm_killswitch", e))?;
        tracing::warn!(reason, "killswitch on: every model call is blocked");
        Ok(())
    }

    /// Turn the killswitch off; true if it was on.
    pub async fn killswitch_off(&self) -> Result<bool, CacheError> {
        let mut c = self.cache.conn();
        let n: i64 = c
            .del(self.killswitch_key())
            .await
            .map_err(|e| self.cache.failed("llm_killswitch", e))?;
        if n > 0 {
            tracing::warn!("killswitch off: model calls resume");
        }
        Ok(n > 0)
    }

    /// The killswitch and today's spend.
    pub async fn status(&self) -> Result<SpendStatus, CacheError> {
        let mut c = self.cache.conn();
        let keys = [self.killswitch_key(), self.spend_key(Utc::now())];
        let (ks, spent): (Option<String>, Option<String>) = c
            .mget(&keys)
            .await
            .map_err(|e| self.cache.failed("llm_killswitch", e))?;
        Ok(SpendStatus {
            killswitch: ks.map(|s| serde_json::from_str(&s)).transpose()?,
            spent_today_usd: micro_to_dollars(spent.as_deref().and_then(spent_micro).unwrap_or(0)),
            cap_micro_usd: self.cap_micro_usd,
        })
    }

    /// Tokens used (or held by calls in flight) by `user` today and this month, for
    /// `hermes users show`.
    pub async fn used(&self, user: UserId) -> Result<(u64, u64), CacheError> {
        let now = Utc::now();
        let keys = [
            self.cache.key(format_args!(
                "llm:budget:{user}:d:{}",
                now.format("%Y-%m-%d")
            )),
            self.cache
                .key(format_args!("llm:budget:{user}:m:{}", now.format("%Y-%m"))),
        ];
        let mut c = self.cache.conn();
        let (d, m): (Option<u64>, Option<u64>) = c
            .mget(&keys)
            .await
            .map_err(|e| self.cache.failed("llm_budget_read", e))?;
        Ok((d.unwrap_or(0), m.unwrap_or(0)))
    }
}

/// Micro-dollars as an exact decimal string of dollars ("0.000024"), for logs.
fn micro_to_usd(micro: u64) -> String {
    format!("{}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

/// Micro-dollars as dollars for a gauge (display only: money is never computed in floats).
fn micro_to_dollars(micro: u64) -> f64 {
    micro as f64 / 1_000_000.0
}

/// Today's spend as stored: integer micro-dollars, or a dollar float written by a build
/// before the switch to integers (read as that old format and converted). Anything else
/// is `None`, which the callers read as nothing spent: the day starts fresh. (An old total
/// of exactly whole dollars, "2", cannot be told from micro-dollars; it reads low on the day
/// of the upgrade only.)
fn spent_micro(s: &str) -> Option<u64> {
    let s = s.trim();
    s.parse::<u64>().ok().or_else(|| usd_to_micro(s))
}

/// A dollar float (the old format of the spend key) as micro-dollars, rounded to the
/// nearest.
fn usd_to_micro(s: &str) -> Option<u64> {
    let v: f64 = s.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * 1_000_000.0).round() as u64)
}

/// A call's worst case: its input estimated at 4 characters a token (tool schemas
/// included) plus its output cap.
pub fn estimate_tokens(
    messages: &[hermes_types::model::ChatMessage],
    tools: &[hermes_types::model::ToolSpec],
    max_output: u32,
) -> u64 {
    let chars: usize = messages
        .iter()
        .map(|m| {
            m.content.as_deref().map_or(0, str::len)
                + m.tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
        })
        .sum::<usize>()
        + tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum::<usize>();
    (chars as u64).div_ceil(4) + u64::from(max_output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_round_trips_through_the_float_counter() {
        assert_eq!(micro_to_usd(24), "0.000024");
        assert_eq!(micro_to_usd(3_000_001), "3.000001");
        assert_eq!(usd_to_micro("3.000001"), Some(3_000_001));
        assert_eq!(usd_to_micro("250"), Some(250_000_000));
        assert_eq!(usd_to_micro("nan"), None);
    }

    #[test]
    fn spend_is_read_as_integer_micro_dollars_or_the_old_dollar_float() {
        assert_eq!(spent_micro("2100"), Some(2100));
        assert_eq!(
            spent_micro("0.00105"),
            Some(1050),
            "a key from an older build"
        );
        assert_eq!(spent_micro("3"), Some(3), "an integer is micro-dollars");
        assert_eq!(spent_micro("garbage"), None);
    }

    #[test]
    fn estimate_counts_input_and_the_output_cap() {
        let m = vec![hermes_types::model::ChatMessage::text(
            hermes_types::model::Role::User,
            "x".repeat(400),
        )];
        assert_eq!(estimate_tokens(&m, &[], 1024), 100 + 1024);
    }
}
