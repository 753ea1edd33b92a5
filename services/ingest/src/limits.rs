//! What keeps one caller from holding what others need (docs/security.md, "No caller can
//! hurt another"):
//!
//! - **Requests held per key**: a key made by `hermes api-keys` holds at most
//!   `HERMES_STREAMS_PER_KEY` requests open at once on this replica: event streams, streamed
//!   answers, callers waiting for their run's outcome. One more is answered 429
//!   `too_many_streams` with `Retry-After` before anything runs, so no run starts for a
//!   caller that was refused. `API_SERVER_KEY` is the operator's and is bounded only by
//!   `HERMES_MAX_IN_FLIGHT`, like its request rate.
//! - **Loopback without a key**: without `API_SERVER_KEY` ingest serves only a loopback
//!   address ([`hermes_config::IngestSettings::check_at`]), and a request must name a
//!   loopback host (`localhost`, `*.localhost`, `127.0.0.0/8`, `[::1]`) in its `Host`
//!   header: a page whose name was rebound to 127.0.0.1 (DNS rebinding) sends its own name
//!   and is refused 403 `host_not_allowed`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::HOST;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_telemetry::LimitMetrics;
use hermes_types::ids::ApiKeyId;

use crate::rest::Caller;
use crate::{AppState, is_event_stream};

/// Seconds a caller refused `too_many_streams` is told to wait.
const RETRY_AFTER_SECS: u64 = 2;

/// The requests each key holds open on this replica.
pub struct KeySlots {
    limit: usize,
    held: Mutex<HashMap<ApiKeyId, usize>>,
    metrics: LimitMetrics,
}

/// One request held by a key; its slot is free again when this is dropped.
pub struct KeySlot {
    slots: Arc<KeySlots>,
    key: ApiKeyId,
}

impl KeySlots {
    pub fn new(limit: usize, metrics: LimitMetrics) -> Arc<Self> {
        Arc::new(Self {
            limit,
            held: Mutex::new(HashMap::new()),
            metrics,
        })
    }

    /// A slot of `key`, or `None` when it holds its limit already.
    pub fn take(self: &Arc<Self>, key: ApiKeyId) -> Option<KeySlot> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(key).or_default();
        if *n >= self.limit {
            return None;
        }
        *n += 1;
        self.metrics.key_streams.inc();
        Some(KeySlot {
            slots: self.clone(),
            key,
        })
    }

    /// How many requests `key` holds now.
    #[cfg(test)]
    fn held(&self, key: ApiKeyId) -> usize {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.get(&key).copied().unwrap_or_default()
    }
}

impl Drop for KeySlot {
    fn drop(&mut self) {
        let mut held = self.slots.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                // Thousands of keys come and go: an idle key costs nothing.
                held.remove(&self.key);
            }
        }
        self.slots.metrics.key_streams.dec();
    }
}

/// Middleware, after the caller check: a key's request takes one of its slots for as long
/// as it is answered, an event stream until the stream ends or the caller hangs up.
pub async fn hold_key_slot(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let Some(Caller::Key(key)) = req.extensions().get::<Caller>() else {
        return next.run(req).await;
    };
    let Some(slot) = app.key_slots.take(key.id) else {
        app.ctx.metrics.limits.key_streams_refused.inc();
        let limit = app.ctx.config.ingest.streams_per_key;
        return ApiError {
            retry_after: Some(RETRY_AFTER_SECS),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ApiErrorCode::TooManyStreams,
                format!(
                    "this key already holds {limit} requests open on this server (event streams, \
                     streamed answers, callers waiting for a run); close one or retry later"
                ),
            )
        }
        .into_response();
    };
    let resp = next.run(req).await;
    if !is_event_stream(&resp) {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _slot = &slot;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Whether `host` (a `Host` header: a name or address, maybe with a port) names this
/// machine's loopback interface.
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        // `[::1]` or `[::1]:8080`
        Some(rest) => match rest.split_once(']') {
            Some((ip, _)) => ip,
            None => return false,
        },
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Middleware without `API_SERVER_KEY`: only requests naming a loopback host are served.
pub async fn loopback_host(
    State(metrics): State<LimitMetrics>,
    req: Request,
    next: Next,
) -> Response {
    let host = req
        .headers()
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.as_str().to_string()));
    if host.as_deref().is_some_and(is_loopback_host) {
        return next.run(req).await;
    }
    metrics.host_refused.inc();
    ApiError::new(
        StatusCode::FORBIDDEN,
        ApiErrorCode::HostNotAllowed,
        "without API_SERVER_KEY this server answers only requests to a loopback host \
         (localhost, 127.0.0.1, [::1]); set API_SERVER_KEY to serve other names",
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_and_addresses_pass() {
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "localhost.",
            "app.localhost:3000",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "10.0.0.1:8080",
            "0.0.0.0:8080",
            "[::]:8080",
            "[::1",
            "",
            "127.0.0.1.nip.io",
        ] {
            assert!(!is_loopback_host(refused), "{refused}");
        }
    }

    #[test]
    fn a_key_holds_at_most_its_limit_and_a_dropped_slot_is_free_again() {
        let metrics = hermes_telemetry::Metrics::new().limits.clone();
        let slots = KeySlots::new(2, metrics.clone());
        let (a, b) = (ApiKeyId::new(), ApiKeyId::new());
        let first = slots.take(a).unwrap();
        let _second = slots.take(a).unwrap();
        assert!(slots.take(a).is_none(), "a third request of the same key");
        let _other = slots.take(b).expect("another key is not held back");
        assert_eq!(metrics.key_streams.get(), 3);
        drop(first);
        assert_eq!(slots.held(a), 1);
        assert!(slots.take(a).is_some());
        drop(_other);
        assert_eq!(slots.held(b), 0);
        assert!(slots.held.lock().unwrap().get(&b).is_none());
    }
}
