//! The metrics of the stages (docs/architecture.md#12-observability): time per message,
//! group commits, messages held while a dependency is down, the outbox's publishes and lag,
//! and the runs that reached a final status (by a stage, or by the stuck-run sweeper).

use prometheus::{Gauge, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Registry};

use crate::metrics::{LATENCY, counter, counter_vec, float_gauge, gauge_vec, histogram_vec};

/// The stages' metric handles.
#[derive(Clone)]
pub struct StageMetrics {
    /// Time a stage spends on one message, from receipt to ack.
    pub duration: HistogramVec,
    /// Messages committed together in one transaction (group commit), by stage.
    pub commit_batch_size: HistogramVec,
    /// Group commits rolled back and redone one message at a time, by stage.
    pub commit_batch_fallbacks: IntCounterVec,
    /// Messages held unacked while a dependency they need is down, by stage and dependency.
    pub held_messages: IntGaugeVec,
    /// Outbox rows published and marked, by path: `eager` or `swept`
    /// (docs/architecture.md#2-every-state-change-travels-with-its-message-the-outbox).
    pub outbox_published: IntCounterVec,
    /// Outbox rows whose publish failed and will be retried.
    pub outbox_publish_failures: IntCounter,
    /// Age of the oldest unpublished outbox row (0 when none).
    pub outbox_lag: Gauge,
    /// Runs that reached a final status, by platform and status.
    pub runs: IntCounterVec,
    /// Runs open past `HERMES_RUN_STUCK_AFTER_SECS` that the router's sweeper ended.
    pub runs_swept: IntCounter,
}

impl StageMetrics {
    /// Register the stages' metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        let outbox_published = counter_vec(
            r,
            "hermes_outbox_published_total",
            "Outbox rows published and marked, by path: eager (by the stage that committed them) or swept (by the relay).",
            &["path"],
        );
        // Both series exist from the start, so rate() sees the first of each.
        for path in ["eager", "swept"] {
            outbox_published.with_label_values(&[path]);
        }
        let outbox_lag = float_gauge(
            r,
            "hermes_outbox_lag_seconds",
            "Age of the oldest unpublished outbox row (0 when none).",
        );
        Self {
            duration: histogram_vec(
                r,
                "hermes_stage_duration_seconds",
                "Time a stage spends on one message, from receipt to ack.",
                &["stage"],
                LATENCY.to_vec(),
            ),
            commit_batch_size: histogram_vec(
                r,
                "hermes_stage_commit_batch_size",
                "Messages committed together in one transaction (group commit), by stage.",
                &["stage"],
                vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0],
            ),
            commit_batch_fallbacks: counter_vec(
                r,
                "hermes_stage_commit_batch_fallbacks_total",
                "Group commits rolled back (a duplicate, a failed message, a lock conflict) and redone one message at a time, by stage.",
                &["stage"],
            ),
            held_messages: gauge_vec(
                r,
                "hermes_stage_held_messages",
                "Messages a stage holds unacked while a dependency they need is down (docs/operations.md).",
                &["stage", "dependency"],
            ),
            outbox_published,
            outbox_publish_failures: counter(
                r,
                "hermes_outbox_publish_failures_total",
                "Outbox rows whose publish failed and will be retried.",
            ),
            outbox_lag,
            runs: counter_vec(
                r,
                "hermes_runs_total",
                "Runs that reached a final status (completed, failed, cancelled), by platform.",
                &["platform", "status"],
            ),
            runs_swept: counter(
                r,
                "hermes_runs_swept_total",
                "Runs still open past HERMES_RUN_STUCK_AFTER_SECS that the router's sweeper ended (failed, refunded).",
            ),
        }
    }
}
