//! The metrics of ingest's front door against strangers (docs/security.md, "The front door
//! under slow or hostile clients"): requests shed by each pool, the bodies being read before
//! their signature is checked, and what became of unknown Bearer keys.

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

use crate::metrics::gauge;

/// The pools a request may be shed from.
pub const SHED_POOLS: &[&str] = &["in_flight", "unverified_body"];

/// What became of an unknown Bearer key: looked up in PostgreSQL (`looked_up`), answered from
/// the cache of misses (`cached`), or refused unread because its client address is over
/// `HERMES_KEY_MISSES_PER_MINUTE` (`rate_limited`).
pub const KEY_MISS_OUTCOMES: &[&str] = &["looked_up", "cached", "rate_limited"];

/// The front door's metric handles (a part of the process's registry).
#[derive(Clone)]
pub struct FrontDoorMetrics {
    /// Requests answered 503 at once because a pool was full, by pool (`in_flight`:
    /// `HERMES_MAX_IN_FLIGHT`; `unverified_body`: `HERMES_UNVERIFIED_BODIES`).
    pub shed: IntCounterVec,
    /// Bodies being read now before their signature is checked.
    pub unverified_bodies: IntGauge,
    /// Bodies waiting now for a place among those (`HERMES_UNVERIFIED_BODY_QUEUE_SECS`).
    pub unverified_waiting: IntGauge,
    /// Unknown Bearer keys by outcome ([`KEY_MISS_OUTCOMES`]).
    pub key_misses: IntCounterVec,
}

impl FrontDoorMetrics {
    /// Register the front door's metrics in `r`, every series at 0.
    pub fn register(r: &Registry) -> Self {
        let counter = |name: &str, help: &str, label: &str, values: &[&str]| {
            let m = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric");
            r.register(Box::new(m.clone()))
                .expect("metric registered once");
            for v in values {
                m.with_label_values(&[v]);
            }
            m
        };
        let unverified_bodies = gauge(
            r,
            "hermes_http_unverified_bodies",
            "Request bodies being read now before their signature is checked (WhatsApp, Instagram, Forge).",
        );
        let unverified_waiting = gauge(
            r,
            "hermes_http_unverified_waiting",
            "Request bodies waiting now for a place to be read before their signature is checked.",
        );
        Self {
            shed: counter(
                "hermes_http_shed_total",
                "Requests answered 503 at once because a pool was full, by pool (in_flight, unverified_body).",
                "pool",
                SHED_POOLS,
            ),
            unverified_bodies,
            unverified_waiting,
            key_misses: counter(
                "hermes_api_key_misses_total",
                "Bearer keys that name no live key, by outcome (looked_up, cached, rate_limited).",
                "outcome",
                KEY_MISS_OUTCOMES,
            ),
        }
    }
}
