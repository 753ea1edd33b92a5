//! The metrics of model calls (docs/architecture.md#12-observability): completions, tokens
//! and cost by backend and tier, cache hits, failures and fallbacks along a chain, and the
//! gateway's own time (its slots and its overhead beyond the providers).

use prometheus::{CounterVec, Histogram, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};

use crate::metrics::{FINE, LATENCY, counter_vec, gauge, histogram, histogram_vec};

/// The model calls' metric handles.
#[derive(Clone)]
pub struct LlmMetrics {
    /// Successful model completions by backend and tier.
    pub calls: IntCounterVec,
    /// Tokens consumed by backend and direction (`input`, `output`).
    pub tokens: IntCounterVec,
    /// Cost of successful calls in US dollars, by backend and tier.
    pub cost: CounterVec,
    /// Answers served from the response cache, by backend and tier.
    pub cache_hits: IntCounterVec,
    /// Failed model calls by backend and reason.
    pub errors: IntCounterVec,
    /// Times a failed backend handed the call to the next one of the chain, by tier.
    pub fallbacks: IntCounterVec,
    /// Time of one model call by backend.
    pub duration: HistogramVec,
    /// Time a call waited for one of the process's call slots.
    pub semaphore_wait: Histogram,
    /// Time the gateway spent on a call beyond waiting on providers.
    pub overhead: Histogram,
    /// Calls holding a slot right now.
    pub in_flight: IntGauge,
}

impl LlmMetrics {
    /// Register the model calls' metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        let cost = CounterVec::new(
            Opts::new(
                "hermes_llm_cost_usd_total",
                "Cost of successful model calls in US dollars, by backend and tier (failed attempts are not billed).",
            ),
            &["backend", "tier"],
        )
        .expect("valid metric");
        r.register(Box::new(cost.clone()))
            .expect("metric registered once");
        Self {
            calls: counter_vec(
                r,
                "hermes_llm_calls_total",
                "Successful model completions by backend and tier.",
                &["backend", "tier"],
            ),
            tokens: counter_vec(
                r,
                "hermes_llm_tokens_total",
                "Tokens consumed by backend and direction (input, output).",
                &["backend", "direction"],
            ),
            cost,
            cache_hits: counter_vec(
                r,
                "hermes_llm_cache_hits_total",
                "Model answers served from the response cache, by backend and tier.",
                &["backend", "tier"],
            ),
            errors: counter_vec(
                r,
                "hermes_llm_errors_total",
                "Failed model calls by backend and reason (rate_limited, server_error, timeout, connect, rejected, malformed).",
                &["backend", "reason"],
            ),
            fallbacks: counter_vec(
                r,
                "hermes_llm_fallbacks_total",
                "Times a failed backend handed the call to the next one of the chain, by tier.",
                &["tier"],
            ),
            duration: histogram_vec(
                r,
                "hermes_llm_call_duration_seconds",
                "Time of one model call by backend.",
                &["backend"],
                LATENCY.to_vec(),
            ),
            semaphore_wait: histogram(
                r,
                "hermes_llm_semaphore_wait_seconds",
                "Time a model call waited for one of the process's call slots.",
                FINE,
            ),
            overhead: histogram(
                r,
                "hermes_llm_overhead_seconds",
                "Time the llm gateway spent on a call beyond waiting on providers (budgets, cache, slots, encoding).",
                FINE,
            ),
            in_flight: gauge(
                r,
                "hermes_llm_in_flight",
                "Model calls holding a slot right now (at most [llm] max_concurrent per process).",
            ),
        }
    }
}
