//! The metrics of the HTTP surfaces (docs/architecture.md#12-observability): requests by
//! route and status and their time, inbound messages by platform and outcome, clients cut
//! for being slow, and `Idempotency-Key` requests (docs/api.md, "Idempotency").

use prometheus::{HistogramVec, IntCounterVec, IntGauge, Registry};

use crate::metrics::{LATENCY, counter_vec, gauge, histogram_vec};

/// The HTTP surfaces' metric handles (ingest's public port and every admin port).
#[derive(Clone)]
pub struct HttpMetrics {
    /// Requests served, by method, matched route and status code.
    pub requests: IntCounterVec,
    /// Time to answer a request, by method and matched route.
    pub duration: HistogramVec,
    /// Inbound messages by platform and outcome (`accepted`, or the refusal's code).
    pub ingest_messages: IntCounterVec,
    /// Connections cut because the client was too slow, by phase (`body`, `write`).
    pub slow_clients: IntCounterVec,
    /// `Idempotency-Key` requests by outcome (docs/api.md, "Idempotency").
    pub idempotency: IntCounterVec,
    /// Requests waiting for the first request with their `Idempotency-Key` to answer.
    pub idempotency_waiting: IntGauge,
    /// A2A JSON-RPC calls (docs/a2a.md), by method as called and outcome (`ok`, or the
    /// error's name).
    pub a2a_requests: IntCounterVec,
}

impl HttpMetrics {
    /// Register the HTTP surfaces' metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        Self {
            requests: counter_vec(
                r,
                "hermes_http_requests_total",
                "HTTP requests served, by method, matched route and status code.",
                &["method", "route", "status"],
            ),
            duration: histogram_vec(
                r,
                "hermes_http_request_duration_seconds",
                "Time to answer an HTTP request, by method and matched route.",
                &["method", "route"],
                LATENCY.to_vec(),
            ),
            ingest_messages: counter_vec(
                r,
                "hermes_ingest_messages_total",
                "Inbound messages by platform and outcome (accepted, or the error code they were refused with).",
                &["platform", "outcome"],
            ),
            slow_clients: counter_vec(
                r,
                "hermes_http_slow_clients_total",
                "Connections cut because the client was too slow, by phase (body: sending a request body; write: taking an answer, past HERMES_HTTP_WRITE_TIMEOUT_SECS; a header block cut by its timeout closes the connection before a request exists).",
                &["phase"],
            ),
            idempotency: counter_vec(
                r,
                "hermes_idempotency_total",
                "Requests with an Idempotency-Key, by outcome: stored, replayed, conflict, waited (a concurrent duplicate that waited for the first), in_use (it waited past its bound), released (the first failed before being accepted), unavailable (PostgreSQL unreachable: served without idempotency).",
                &["outcome"],
            ),
            idempotency_waiting: gauge(
                r,
                "hermes_idempotency_waiting",
                "Requests waiting for the first request with their Idempotency-Key to answer.",
            ),
            a2a_requests: counter_vec(
                r,
                "hermes_a2a_requests_total",
                "A2A JSON-RPC calls by method (message/send, SendMessage, ...; unknown for another) and outcome (ok, or the JSON-RPC error's name: parse_error, invalid_request, method_not_found, invalid_params, task_not_found, task_not_cancelable, ...).",
                &["method", "outcome"],
            ),
        }
    }
}
