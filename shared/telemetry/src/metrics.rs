//! The Prometheus metrics of the fleet, in one registry per process (per test fleet in
//! tests, so parallel fleets never share counters). Names follow docs/architecture.md#12-observability.
//! Each area registers its own metrics in a file of its own (`http_metrics.rs`,
//! `bus_metrics.rs`, …); [`Metrics`] composes them.

use std::sync::Arc;

use prometheus::core::Collector;
use prometheus::{
    Encoder, Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::{
    AgentMetrics, BudgetMetrics, BusMetrics, DeliveryMetrics, DiscordGatewayMetrics,
    FrontDoorMetrics, HttpMetrics, LimitMetrics, LlmMetrics, OperatorMetrics, ProcessMetrics,
    RouterMetrics, RunMetrics, StageMetrics, ToolMetrics,
};

/// Every metric a Hermes process exports. Cheap to clone (shared).
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

/// The metric handles, one struct per area (each field's doc says what it counts).
pub struct Inner {
    pub registry: Registry,
    /// Ingest's and the admin ports' HTTP requests, inbound messages, idempotency.
    pub http: HttpMetrics,
    /// The connection to RabbitMQ, publishes, consumed messages, queues, retries, parking.
    pub bus: BusMetrics,
    /// Stages' time and group commits, held messages, the outbox, runs ended.
    pub stages: StageMetrics,
    /// Readiness, dependencies, Redis errors, ops alerts, scheduled jobs, retention.
    pub process: ProcessMetrics,
    /// Model calls: completions, tokens, cost, cache, failures, slots.
    pub llm: LlmMetrics,
    /// Budget refusals, the spend cap and today's spend, PostgreSQL fallbacks.
    pub budgets: BudgetMetrics,
    /// Tool calls, refusals, reloads, MCP servers.
    pub tools: ToolMetrics,
    /// Replies sent, failed attempts, platform statuses, breakers, presence, wake webhooks.
    pub delivery: DeliveryMetrics,
    /// The router's decisions, bursts, media, credits, soul and recall, dispatch.
    pub router: RouterMetrics,
    /// The agent contract (external runs, the MCP surface, Forge wakes).
    pub agents: AgentMetrics,
    /// The operator MCP server and tool approvals.
    pub operator: OperatorMetrics,
    /// The limits that keep one caller from hurting another.
    pub limits: LimitMetrics,
    /// Ingest's front door against strangers.
    pub front_door: FrontDoorMetrics,
    /// Run event streams and late messages of closed runs.
    pub run_events: RunMetrics,
    /// The Discord Gateway connector's shards, sessions and events.
    pub discord_gateway: DiscordGatewayMetrics,
}

impl std::ops::Deref for Metrics {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

/// Register `m` in `r` and hand it back (a name is registered once per registry).
fn registered<M: Collector + Clone + 'static>(r: &Registry, m: M) -> M {
    r.register(Box::new(m.clone()))
        .expect("metric registered once");
    m
}

pub(crate) fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    registered(
        r,
        IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"),
    )
}

pub(crate) fn histogram_vec(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: Vec<f64>,
) -> HistogramVec {
    let opts = HistogramOpts::new(name, help).buckets(buckets);
    registered(r, HistogramVec::new(opts, labels).expect("valid metric"))
}

pub(crate) fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    registered(
        r,
        IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"),
    )
}

pub(crate) fn counter(r: &Registry, name: &str, help: &str) -> IntCounter {
    registered(r, IntCounter::new(name, help).expect("valid metric"))
}

pub(crate) fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    registered(r, IntGauge::new(name, help).expect("valid metric"))
}

pub(crate) fn float_gauge(r: &Registry, name: &str, help: &str) -> Gauge {
    registered(r, Gauge::new(name, help).expect("valid metric"))
}

pub(crate) fn histogram(r: &Registry, name: &str, help: &str, buckets: &[f64]) -> Histogram {
    let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
    registered(r, Histogram::with_opts(opts).expect("valid metric"))
}

/// Buckets for overheads measured in tens of microseconds to seconds.
pub(crate) const FINE: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0, 5.0,
    15.0,
];

/// Buckets for things measured in milliseconds to a minute.
pub(crate) const LATENCY: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

impl Metrics {
    /// A fresh registry with every area's metrics in it.
    pub fn new() -> Self {
        let r = Registry::new();
        // The exporter is the process's, so its counter is too (docs/tracing.md).
        registered(&r, crate::trace::DROPPED.clone());
        Self(Arc::new(Inner {
            http: HttpMetrics::register(&r),
            bus: BusMetrics::register(&r),
            stages: StageMetrics::register(&r),
            process: ProcessMetrics::register(&r),
            llm: LlmMetrics::register(&r),
            budgets: BudgetMetrics::register(&r),
            tools: ToolMetrics::register(&r),
            delivery: DeliveryMetrics::register(&r),
            router: RouterMetrics::register(&r),
            agents: AgentMetrics::register(&r),
            operator: OperatorMetrics::register(&r),
            limits: LimitMetrics::register(&r),
            front_door: FrontDoorMetrics::register(&r),
            run_events: RunMetrics::register(&r),
            discord_gateway: DiscordGatewayMetrics::register(&r),
            registry: r,
        }))
    }

    /// Export the global daily spend cap as `hermes_llm_spend_cap_usd` (registered on the
    /// first call only: without a cap the gauge stays absent, so "spend near the cap" alerts
    /// have nothing to compare against rather than a misleading 0).
    pub fn set_spend_cap_usd(&self, cap_usd: f64) {
        // A second registration (a second Budgets in one process) is refused; the value is shared.
        let _ = self
            .registry
            .register(Box::new(self.budgets.spend_cap.clone()));
        self.budgets.spend_cap.set(cap_usd);
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding never fails");
        String::from_utf8(buf).expect("prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_prometheus_conventions() {
        let m = Metrics::new();
        m.llm.calls.with_label_values(&["mock", "free"]).inc();
        m.http
            .requests
            .with_label_values(&["GET", "/health", "200"])
            .inc();
        let text = m.render();
        assert!(text.contains("hermes_llm_calls_total{backend=\"mock\",tier=\"free\"} 1"));
        assert!(text.contains("hermes_http_requests_total"));
        for family in m.registry.gather() {
            assert!(family.name().starts_with("hermes_"), "{}", family.name());
        }
    }

    #[test]
    fn the_spend_cap_is_exported_only_once_set() {
        let m = Metrics::new();
        assert!(!m.render().contains("hermes_llm_spend_cap_usd"));
        assert!(
            m.render()
                .contains("hermes_alerts_total{kind=\"soul_invalidation_failed\"} 0")
        );
        m.set_spend_cap_usd(250.5);
        m.set_spend_cap_usd(250.5);
        assert!(m.render().contains("hermes_llm_spend_cap_usd 250.5"));
    }
}
