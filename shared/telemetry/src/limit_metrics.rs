//! The metrics of the limits that keep one caller from hurting another (docs/security.md,
//! "No caller can hurt another"): the images of a model call, streams held per key, streams
//! ended by their lifetime and requests refused by the loopback Host check.

use prometheus::{HistogramVec, IntCounter, IntCounterVec, IntGauge, Registry};

use crate::metrics::{counter, counter_vec, gauge, histogram_vec};

/// Buckets of how long the images of one model call took: 10 ms to two minutes.
const INLINE_SECONDS: &[f64] = &[
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
];

/// Handles of the limits' metrics.
#[derive(Clone)]
pub struct LimitMetrics {
    /// Model calls whose images were inlined, by outcome: `ok`, `too_many_bytes` (over
    /// `HERMES_IMAGE_INLINE_MAX_BYTES`), `deadline` (past `HERMES_IMAGE_FETCH_DEADLINE_SECS`),
    /// `refused` (an image could not be used).
    pub image_inlines: IntCounterVec,
    /// How long the images of one model call took, by the same outcome.
    pub image_inline_seconds: HistogramVec,
    /// Requests held now under a key's `HERMES_STREAMS_PER_KEY`.
    pub key_streams: IntGauge,
    /// Requests refused 429 `too_many_streams`.
    pub key_streams_refused: IntCounter,
    /// Event streams ended by the server, by reason (`lifetime`: `HERMES_STREAM_MAX_SECS`).
    pub streams_cut: IntCounterVec,
    /// Requests refused because their `Host` is not a loopback name (no `API_SERVER_KEY`).
    pub host_refused: IntCounter,
}

impl LimitMetrics {
    /// Register the limits' metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        Self {
            image_inlines: counter_vec(
                r,
                "hermes_image_inline_total",
                "Model calls whose images the llm stage fetched and inlined, by outcome (ok, too_many_bytes, deadline, refused).",
                &["outcome"],
            ),
            image_inline_seconds: histogram_vec(
                r,
                "hermes_image_inline_seconds",
                "How long fetching and inlining the images of one model call took, by outcome.",
                &["outcome"],
                INLINE_SECONDS.to_vec(),
            ),
            key_streams: gauge(
                r,
                "hermes_key_streams_held",
                "Requests held open now under a key's HERMES_STREAMS_PER_KEY (event streams, streamed answers, waiting callers).",
            ),
            key_streams_refused: counter(
                r,
                "hermes_key_streams_refused_total",
                "Requests refused 429 too_many_streams: their key already held HERMES_STREAMS_PER_KEY requests open.",
            ),
            streams_cut: counter_vec(
                r,
                "hermes_http_streams_cut_total",
                "Event streams ended by ingest, by reason (lifetime: open for HERMES_STREAM_MAX_SECS).",
                &["reason"],
            ),
            host_refused: counter(
                r,
                "hermes_http_host_refused_total",
                "Requests refused 421 because, without API_SERVER_KEY, their Host header was not a loopback name (DNS rebinding).",
            ),
        }
    }
}
