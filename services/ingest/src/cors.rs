//! CORS for browsers calling the API directly (docs/api.md, CORS): off unless
//! `API_SERVER_CORS_ORIGINS` lists origins. A listed origin's preflight is answered here,
//! before any key is asked for (a browser never sends one with it), and every answer to it,
//! errors and event streams included, carries the CORS headers. Any other origin gets none.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_METHOD, ORIGIN,
    VARY,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Methods the API answers.
pub const ALLOWED_METHODS: &str = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
/// Request headers a browser may send.
pub const ALLOWED_HEADERS: &str =
    "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, traceparent";
/// Response headers a browser's script may read.
pub const EXPOSED_HEADERS: &str = "x-hermes-run-id, Idempotency-Replayed, Retry-After";
/// Seconds a browser may cache a preflight.
pub const MAX_AGE_SECS: &str = "600";

/// The allowed origins, as browsers send them in `Origin`.
#[derive(Clone, Debug)]
pub struct Origins(Arc<[HeaderValue]>);

impl Origins {
    /// The allowlist of `API_SERVER_CORS_ORIGINS`; `None` when it is empty (CORS off).
    pub fn new(origins: &[String]) -> Option<Self> {
        let list: Vec<HeaderValue> = origins
            .iter()
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        (!list.is_empty()).then(|| Self(list.into()))
    }

    /// The request's origin, when it is allowed.
    fn allowed(&self, headers: &HeaderMap) -> Option<HeaderValue> {
        let origin = headers.get(ORIGIN)?;
        self.0.iter().any(|o| o == origin).then(|| origin.clone())
    }
}

/// Middleware: answer preflights, and add the CORS headers for an allowed origin.
pub async fn cors(State(origins): State<Origins>, req: Request, next: Next) -> Response {
    let allowed = origins.allowed(req.headers());
    let preflight = req.method() == Method::OPTIONS
        && req.headers().contains_key(ACCESS_CONTROL_REQUEST_METHOD);
    let mut resp = if preflight {
        StatusCode::NO_CONTENT.into_response()
    } else {
        next.run(req).await
    };
    let h = resp.headers_mut();
    // Answers differ by origin: caches must keep them apart.
    h.append(VARY, HeaderValue::from_static("Origin"));
    let Some(origin) = allowed else {
        return resp;
    };
    h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    if preflight {
        h.insert(
            ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(ALLOWED_METHODS),
        );
        h.insert(
            ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(ALLOWED_HEADERS),
        );
        h.insert(
            ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(MAX_AGE_SECS),
        );
    } else {
        h.insert(
            ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSED_HEADERS),
        );
    }
    resp
}
