//! The metrics of budgets and spend (docs/models-and-budgets.md, "Where budgets live"): calls refused before a
//! provider, the global cap failing open, reads and writes PostgreSQL served for Redis, and
//! the day's spend against its cap.

use prometheus::{Gauge, IntCounter, IntCounterVec, Registry};

use crate::metrics::{counter, counter_vec, float_gauge};

/// The budgets' metric handles.
#[derive(Clone)]
pub struct BudgetMetrics {
    /// Model calls refused before reaching a provider, by scope.
    pub rejections: IntCounterVec,
    /// Model calls let through because the global spend cap could not be read.
    pub fail_open: IntCounter,
    /// Budget, spend and killswitch reads and writes PostgreSQL served for Redis, by what.
    pub fallback: IntCounterVec,
    /// `LLM_GLOBAL_DAILY_BUDGET_USD` in dollars: registered only once a cap is set
    /// ([`crate::Metrics::set_spend_cap_usd`]).
    pub spend_cap: Gauge,
    /// Today's (UTC) platform-wide model spend in dollars.
    pub spend_today: Gauge,
}

impl BudgetMetrics {
    /// Register the budgets' metrics in `r` (all but the spend cap).
    pub fn register(r: &Registry) -> Self {
        let spend_cap = Gauge::new(
            "hermes_llm_spend_cap_usd",
            "LLM_GLOBAL_DAILY_BUDGET_USD in dollars; absent when no cap is set.",
        )
        .expect("valid metric");
        let spend_today = float_gauge(
            r,
            "hermes_llm_spend_today_usd",
            "Today's (UTC) platform-wide model spend in dollars, as last read or written by this process.",
        );
        Self {
            rejections: counter_vec(
                r,
                "hermes_llm_budget_rejections_total",
                "Model calls refused before reaching a provider, by scope (user_daily, user_monthly, budget_unavailable, global_cap, killswitch, capacity, workspace_secrets).",
                &["scope"],
            ),
            fail_open: counter(
                r,
                "hermes_llm_budget_fail_open_total",
                "Model calls let through because the global spend cap could not be read (Redis down).",
            ),
            fallback: counter_vec(
                r,
                "hermes_budget_fallback_total",
                "Budget, spend and killswitch reads and writes served by PostgreSQL because Redis failed or had forgotten, by what (reserve, settle, spend, killswitch, used).",
                &["what"],
            ),
            spend_cap,
            spend_today,
        }
    }
}
