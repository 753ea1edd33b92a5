//! The metrics of Hermes as an MCP server for operators (docs/operator-mcp.md): its tool
//! calls, the events its clients are handed and how late, messages sent through it, and
//! tool calls waiting for an operator's approval.

use prometheus::{Gauge, HistogramVec, IntCounterVec, IntGauge, Registry};

use crate::metrics::{counter_vec as counter, float_gauge, gauge, histogram_vec};

/// Buckets of an event's age when a client gets it: a millisecond to a minute.
const EVENT_LAG: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];
/// Buckets of how long a call waited for its answer: a second to a day.
const APPROVAL_WAIT: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0, 86400.0,
];

/// The operator MCP server's and the approvals' metric handles.
#[derive(Clone)]
pub struct OperatorMetrics {
    /// Tool calls, by transport (`stdio`, `http`), tool and outcome (`ok` or the error code).
    pub calls: IntCounterVec,
    /// Events handed to clients, by tool (`events_poll`, `events_wait`) and kind.
    pub events: IntCounterVec,
    /// From an event's commit to a client getting it, by tool.
    pub event_lag: HistogramVec,
    /// `messages_send` calls, by platform and outcome (`queued`, `sent`, `failed`,
    /// `rate_limited`, `refused`).
    pub sends: IntCounterVec,
    /// Approvals by outcome: `requested`, `allowed`, `denied`, `timed_out`.
    pub approvals: IntCounterVec,
    /// From a call's request for approval to its answer, by outcome.
    pub approval_wait: HistogramVec,
    /// Tool calls waiting for an operator now (read from PostgreSQL by the tools service).
    pub approvals_pending: IntGauge,
    /// How long the oldest waiting call has waited, in seconds (0 when none waits).
    pub approval_oldest: Gauge,
}

impl OperatorMetrics {
    /// Register the operator MCP server's and the approvals' metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        let approvals_pending = gauge(
            r,
            "hermes_approvals_pending",
            "Tool calls waiting for an operator's approval now.",
        );
        let approval_oldest = float_gauge(
            r,
            "hermes_approval_oldest_pending_seconds",
            "How long the oldest tool call waiting for approval has waited (0 when none waits).",
        );
        Self {
            calls: counter(
                r,
                "hermes_operator_mcp_calls_total",
                "Tool calls on the operator MCP server, by transport, tool and outcome (ok or the error code).",
                &["transport", "tool", "outcome"],
            ),
            events: counter(
                r,
                "hermes_operator_events_total",
                "Events handed to operator MCP clients, by tool (events_poll, events_wait) and kind.",
                &["tool", "kind"],
            ),
            event_lag: histogram_vec(
                r,
                "hermes_operator_event_lag_seconds",
                "From an event's write to an operator MCP client getting it, by tool.",
                &["tool"],
                EVENT_LAG.to_vec(),
            ),
            sends: counter(
                r,
                "hermes_operator_sends_total",
                "messages_send calls of operator MCP clients, by platform and outcome (queued, sent, failed, rate_limited, refused).",
                &["platform", "outcome"],
            ),
            approvals: counter(
                r,
                "hermes_approvals_total",
                "Tool calls that needed an operator's approval, by outcome (requested, allowed, denied, timed_out).",
                &["outcome"],
            ),
            approval_wait: histogram_vec(
                r,
                "hermes_approval_wait_seconds",
                "From a tool call's request for approval to its answer, by outcome (allowed, denied, timed_out).",
                &["outcome"],
                APPROVAL_WAIT.to_vec(),
            ),
            approvals_pending,
            approval_oldest,
        }
    }
}
