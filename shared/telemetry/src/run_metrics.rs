//! The metrics of runs' event streams in Redis (docs/architecture.md#10-redis): what was written
//! to them and what was not (no reader, the stream's byte bound), the bytes written per
//! platform, the reads of them, and the late messages of closed runs that the stages skipped.

use prometheus::{IntCounter, IntCounterVec, Registry};

use crate::metrics::{counter as plain_counter, counter_vec as counter};

/// The run event streams' and late messages' metric handles.
#[derive(Clone)]
pub struct RunMetrics {
    /// Appends to run event streams, by the run's platform and outcome: `written`, `unread`
    /// (a chat run nobody follows: nothing stored), `full` (the stream is at its byte bound:
    /// the event is dropped), `final_by_reference` (a final event over the bound, written
    /// as a pointer to the run's row).
    pub events: IntCounterVec,
    /// Bytes written to run event streams, by the run's platform.
    pub bytes: IntCounterVec,
    /// Reads of run event streams by the callers waiting on runs and their followers.
    pub reads: IntCounter,
    /// Messages of a run already closed (answered, or swept and refunded) that a stage
    /// acked without effect, by stage: no model call, no tool call, no second reply.
    pub late_messages: IntCounterVec,
}

impl RunMetrics {
    /// The outcomes of [`RunMetrics::events`].
    pub const OUTCOMES: [&str; 4] = ["written", "unread", "full", "final_by_reference"];

    /// Register the metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        let events = counter(
            r,
            "hermes_run_events_total",
            "Appends to run event streams in Redis, by the run's platform and outcome: written, unread (a chat run nobody follows: nothing stored), full (the stream reached HERMES_RUN_EVENTS_MAX_BYTES: dropped), final_by_reference (a final event over the bound, written as a pointer to the run's row).",
            &["platform", "outcome"],
        );
        let bytes = counter(
            r,
            "hermes_run_event_bytes_total",
            "Bytes written to run event streams in Redis, by the run's platform.",
            &["platform"],
        );
        let reads = plain_counter(
            r,
            "hermes_run_event_reads_total",
            "Reads of run event streams in Redis by callers waiting on runs and by followers of their events.",
        );
        let late_messages = counter(
            r,
            "hermes_stage_late_messages_total",
            "Messages of a run already closed (answered, or swept and refunded) acked without effect, by stage.",
            &["stage"],
        );
        for stage in ["llm", "tools"] {
            late_messages.with_label_values(&[stage]);
        }
        Self {
            events,
            bytes,
            reads,
            late_messages,
        }
    }
}
