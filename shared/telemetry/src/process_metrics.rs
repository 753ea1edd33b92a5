//! The metrics of a process's health (docs/architecture.md#12-observability): its
//! components' readiness, the dependencies it reaches or waits for, failed Redis calls, the
//! conditions that page ops, and the periodic work it does beside the stages (scheduled
//! jobs, the retention sweeper).

use prometheus::{GaugeVec, Histogram, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

use crate::metrics::{LATENCY, counter_vec, gauge, gauge_vec, histogram};

/// A process's health and periodic work's metric handles.
#[derive(Clone)]
pub struct ProcessMetrics {
    /// 1 when a component of this process is ready, by component.
    pub ready: GaugeVec,
    /// 1 while this process reaches the dependency, 0 while it is down and probed.
    pub dependency_up: IntGaugeVec,
    /// Outages of a dependency seen by this process.
    pub dependency_outages: IntCounterVec,
    /// Redis calls that failed or timed out, by operation.
    pub redis_errors: IntCounterVec,
    /// Conditions that page ops, by [`crate::AlertKind`].
    pub alerts: IntCounterVec,
    /// Scheduled jobs due and not yet claimed (docs/operations.md, "Scheduled jobs").
    pub jobs_due: IntGauge,
    /// Runs of scheduled jobs queued, by trigger.
    pub jobs_runs: IntCounterVec,
    /// Time from a job's due time to the scheduler claiming it.
    pub jobs_claim_lag: Histogram,
    /// Rows the retention sweeper removed, by table.
    pub retention_removed: IntCounterVec,
    /// Retention sweeps by outcome.
    pub retention_sweeps: IntCounterVec,
}

impl ProcessMetrics {
    /// Register a process's health and periodic work's metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        let ready = GaugeVec::new(
            Opts::new(
                "hermes_component_ready",
                "1 when a component of this process is ready.",
            ),
            &["component"],
        )
        .expect("valid metric");
        r.register(Box::new(ready.clone()))
            .expect("metric registered once");
        let alerts = counter_vec(
            r,
            "hermes_alerts_total",
            "Conditions that page ops, by kind (breaker_open, parking_queue_growth, parking_queue_full, killswitch_on, soul_invalidation_failed).",
            &["kind"],
        );
        // Known kinds start at 0, so an alert on their increase sees the series before the first page.
        for kind in crate::AlertKind::ALL.map(crate::AlertKind::as_str) {
            alerts.with_label_values(&[kind]);
        }
        Self {
            ready,
            dependency_up: gauge_vec(
                r,
                "hermes_dependency_up",
                "1 while this process reaches the dependency, 0 while it is down and probed.",
                &["dependency"],
            ),
            dependency_outages: counter_vec(
                r,
                "hermes_dependency_outages_total",
                "Outages of a dependency seen by this process (each holds messages until it is back).",
                &["dependency"],
            ),
            redis_errors: counter_vec(
                r,
                "hermes_redis_errors_total",
                "Redis calls that failed or timed out, by operation.",
                &["op"],
            ),
            alerts,
            jobs_due: gauge(
                r,
                "hermes_jobs_due",
                "Scheduled jobs due and not yet claimed, as a scheduler last counted them.",
            ),
            jobs_runs: counter_vec(
                r,
                "hermes_jobs_runs_total",
                "Runs of scheduled jobs queued, by trigger (schedule, manual).",
                &["trigger"],
            ),
            jobs_claim_lag: histogram(
                r,
                "hermes_jobs_claim_lag_seconds",
                "Time from a job's due time to the scheduler claiming it.",
                LATENCY,
            ),
            retention_removed: counter_vec(
                r,
                "hermes_retention_removed_total",
                "Rows the retention sweeper removed, by table (credit_ledger: rows folded into summaries).",
                &["table"],
            ),
            retention_sweeps: counter_vec(
                r,
                "hermes_retention_sweeps_total",
                "Retention sweeps by outcome (done, yielded to another replica, failed).",
                &["outcome"],
            ),
        }
    }
}
