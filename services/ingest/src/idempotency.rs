//! `Idempotency-Key` on every POST of the API (docs/api.md, idempotency): a middleware
//! around the authenticated routes, so it covers each POST route they mount without the
//! handler knowing. The first request with a key runs; its answer is kept in PostgreSQL
//! ([`hermes_db::idempotency`], where no memory pressure can evict it) and replayed, with
//! `Idempotency-Replayed: true`, to every repeat within 24 hours from any replica. A repeat
//! with another body is refused; one sent while the first still runs waits for it.

use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hermes_db::idempotency::{Begin, Record, RecordKey, Scope, StoredAnswer};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::rest::Caller;
use crate::{AppState, body_or_error};

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The header on a replayed answer.
pub const REPLAYED: &str = "idempotency-replayed";
/// Longest key accepted.
const MAX_KEY_LEN: usize = 255;
/// Largest answer body kept whole; a larger one replays as its run's id.
const MAX_KEPT_BODY: usize = 1 << 20;
/// How long after the run timeout a pending marker outlives its request (a replica that
/// died mid-request), and a waiting repeat waits beyond it.
const PENDING_MARGIN: Duration = Duration::from_secs(30);
const WAIT_MARGIN: Duration = Duration::from_secs(10);
/// How often a waiting repeat looks again: soon at first, then at most this often.
const FIRST_LOOK: Duration = Duration::from_millis(20);
const LAST_LOOK: Duration = Duration::from_millis(250);

/// The key of a request: 1 to 255 printable ASCII characters.
fn parse_key(value: &HeaderValue) -> Result<String, ApiError> {
    let bytes = value.as_bytes();
    if bytes.is_empty()
        || bytes.len() > MAX_KEY_LEN
        || !bytes.iter().all(|b| (0x20..=0x7e).contains(b))
    {
        return Err(ApiError::bad_request(
            ApiErrorCode::InvalidIdempotencyKey,
            format!("Idempotency-Key must be 1 to {MAX_KEY_LEN} printable ASCII characters"),
        ));
    }
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// What identifies a request: its path and its body, hashed.
fn request_hash(path: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update([0]);
    h.update(body);
    hex::encode(h.finalize())
}

/// Whose records these are: two calling keys never share one.
fn scope(req: &Request) -> Scope {
    match req.extensions().get::<Caller>() {
        Some(Caller::Operator) => Scope::Operator,
        Some(Caller::Key(k)) => Scope::Key(k.id),
        None => Scope::Anonymous,
    }
}

fn count(app: &AppState, outcome: &str) {
    app.ctx
        .metrics
        .http
        .idempotency
        .with_label_values(&[outcome])
        .inc();
}

fn conflict() -> Response {
    ApiError::new(
        StatusCode::CONFLICT,
        ApiErrorCode::IdempotencyKeyConflict,
        "this Idempotency-Key was used with another request (route or body); use a new key",
    )
    .into_response()
}

/// Middleware: POST requests with an `Idempotency-Key` run once; other requests pass.
pub async fn idempotent(State(app): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let Some(raw) = req.headers().get(HEADER) else {
        return next.run(req).await;
    };
    let key = match parse_key(raw) {
        Ok(key) => key,
        Err(e) => return e.into_response(),
    };
    let record_key = RecordKey::new(scope(&req), &key);
    let (parts, body) = req.into_parts();
    let limit = app.ctx.config.ingest.max_body_bytes;
    let read = Bytes::from_request(Request::from_parts(parts.clone(), body), &()).await;
    let body = match body_or_error(limit, read) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let hash = request_hash(parts.uri.path(), &body);
    let pending = app.ctx.config.ingest.run_timeout + PENDING_MARGIN;
    let deadline = Instant::now() + app.ctx.config.ingest.run_timeout + WAIT_MARGIN;
    let mut waited = false;
    loop {
        let found = match app
            .idempotency
            .begin(&record_key, &hash, pending.as_secs())
            .await
        {
            Ok(Begin::Taken(marker)) => {
                let req = Request::from_parts(parts, Body::from(body));
                // Its own task: a caller that hangs up does not cancel the request, whose
                // answer is then kept for the retry instead of its marker left to expire.
                let (app, key) = (app.clone(), record_key.clone());
                let first =
                    tokio::spawn(async move { run_first(&app, &key, marker, req, next).await });
                return first.await.unwrap_or_else(|e| {
                    tracing::error!(error = %e, "an idempotent request failed");
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        ApiErrorCode::Internal,
                        "internal error",
                    )
                    .into_response()
                });
            }
            Ok(Begin::Found(found)) => found,
            Err(e) => {
                // Fail open, as the dedupe and the rate limits do (docs/api.md, idempotency).
                tracing::warn!(error = %e, "idempotency unavailable; serving without it");
                count(&app, "unavailable");
                return next.run(Request::from_parts(parts, Body::from(body))).await;
            }
        };
        if found.hash() != hash {
            count(&app, "conflict");
            return conflict();
        }
        match wait_for_answer(&app, &record_key, &hash, found, deadline, &mut waited).await {
            Waited::Answer(answer) => {
                if waited {
                    count(&app, "waited");
                }
                count(&app, "replayed");
                return replay(answer);
            }
            Waited::Conflict => {
                count(&app, "conflict");
                return conflict();
            }
            Waited::Released => continue,
            Waited::TimedOut => {
                count(&app, "in_use");
                return ApiError {
                    retry_after: Some(5),
                    ..ApiError::new(
                        StatusCode::CONFLICT,
                        ApiErrorCode::IdempotencyKeyInUse,
                        "a request with this Idempotency-Key is still running; retry shortly",
                    )
                }
                .into_response();
            }
            Waited::Unavailable => {
                count(&app, "unavailable");
                return next.run(Request::from_parts(parts, Body::from(body))).await;
            }
        }
    }
}

/// How waiting on another request's marker ended.
enum Waited {
    Answer(StoredAnswer),
    /// The key now holds another request (it was released and taken again).
    Conflict,
    /// The marker is gone: the first request failed before being accepted.
    Released,
    TimedOut,
    Unavailable,
}

/// One request counted in `hermes_idempotency_waiting` while it lives.
struct Waiting(hermes_telemetry::Metrics);

impl Waiting {
    fn new(app: &AppState) -> Self {
        app.ctx.metrics.http.idempotency_waiting.inc();
        Self(app.ctx.metrics.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.http.idempotency_waiting.dec();
    }
}

/// Wait (bounded) until `found`, another request's marker, becomes an answer.
async fn wait_for_answer(
    app: &AppState,
    record_key: &RecordKey,
    hash: &str,
    mut found: Record,
    deadline: Instant,
    waited: &mut bool,
) -> Waited {
    let mut look = FIRST_LOOK;
    let mut waiting = None;
    loop {
        match found {
            Record::Done { answer, .. } => return Waited::Answer(answer),
            Record::Pending { .. } if Instant::now() >= deadline => return Waited::TimedOut,
            Record::Pending { .. } => {}
        }
        *waited = true;
        if waiting.is_none() {
            waiting = Some(Waiting::new(app));
        }
        tokio::time::sleep(look).await;
        look = (look * 2).min(LAST_LOOK);
        found = match app.idempotency.get(record_key).await {
            Ok(Some(r)) if r.hash() != hash => return Waited::Conflict,
            Ok(Some(r)) => r,
            Ok(None) => return Waited::Released,
            Err(e) => {
                tracing::warn!(error = %e, "idempotency unavailable while waiting; serving without it");
                return Waited::Unavailable;
            }
        };
    }
}

/// Was the request accepted? A success, or an answer naming the run it started (a run that
/// failed or timed out after being queued is the request's answer too). Anything else (a
/// refusal, a shed, the broker not confirming) releases the key so that a retry runs.
fn accepted(resp: &Response) -> bool {
    resp.status().is_success() || resp.headers().contains_key(crate::chat::RUN_ID_HEADER)
}

/// Run the request that took the key and keep its answer.
async fn run_first(
    app: &AppState,
    record_key: &RecordKey,
    marker: Record,
    req: Request,
    next: Next,
) -> Response {
    let resp = next.run(req).await;
    if !accepted(&resp) {
        if let Err(e) = app.idempotency.finish(record_key, &marker, None).await {
            tracing::warn!(error = %e, "cannot release an idempotency key; it expires by itself");
        }
        count(app, "released");
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let header = |name| {
        parts
            .headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .map(str::to_string)
    };
    let content_type = header(CONTENT_TYPE.as_str());
    let run_id = header(crate::chat::RUN_ID_HEADER);
    let streamed = content_type
        .as_deref()
        .is_some_and(|t| t.starts_with("text/event-stream"));
    // A stream is the first caller's alone: it is recorded by its run, as soon as it starts,
    // and passes through untouched.
    let (kept, body) = if streamed {
        (None, body)
    } else {
        match axum::body::to_bytes(body, MAX_KEPT_BODY).await {
            Ok(bytes) => (String::from_utf8(bytes.to_vec()).ok(), Body::from(bytes)),
            Err(e) => {
                tracing::warn!(error = %e, "answer body unreadable; keeping its run only");
                (None, Body::empty())
            }
        }
    };
    let answer = StoredAnswer {
        status: parts.status.as_u16(),
        content_type,
        run_id,
        body: kept,
    };
    match app
        .idempotency
        .finish(record_key, &marker, Some(answer))
        .await
    {
        Ok(true) => count(app, "stored"),
        Ok(false) => tracing::warn!("idempotency marker expired before the answer; not kept"),
        Err(e) => {
            tracing::warn!(error = %e, "cannot keep an idempotent answer; its marker expires");
            count(app, "unavailable");
        }
    }
    Response::from_parts(parts, body)
}

/// The kept answer, marked as a replay. An answer kept without its body (a stream) replays
/// as `200 {"object":"hermes.replayed_stream","run_id":…}`.
fn replay(answer: StoredAnswer) -> Response {
    let mut resp = match answer.body {
        Some(body) => {
            let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
            let mut resp = (status, body).into_response();
            if let Some(v) = answer
                .content_type
                .as_deref()
                .and_then(|t| HeaderValue::from_str(t).ok())
            {
                resp.headers_mut().insert(CONTENT_TYPE, v);
            }
            resp
        }
        None => axum::Json(json!({
            "object": "hermes.replayed_stream",
            "run_id": answer.run_id,
        }))
        .into_response(),
    };
    let h = resp.headers_mut();
    h.insert(REPLAYED, HeaderValue::from_static("true"));
    if let Some(v) = answer
        .run_id
        .as_deref()
        .and_then(|r| HeaderValue::from_str(r).ok())
    {
        h.insert(crate::chat::RUN_ID_HEADER, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_one_to_255_printable_characters() {
        for ok in ["a", "order 42/retry-1", &"k".repeat(255)] {
            assert_eq!(parse_key(&HeaderValue::from_str(ok).unwrap()).unwrap(), ok);
        }
        for bad in [
            HeaderValue::from_static(""),
            HeaderValue::from_str(&"k".repeat(256)).unwrap(),
            HeaderValue::from_bytes(b"tab\there").unwrap(),
            HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        ] {
            let e = parse_key(&bad).unwrap_err();
            assert_eq!(
                (e.status.as_u16(), e.code),
                (400, ApiErrorCode::InvalidIdempotencyKey)
            );
        }
    }

    #[test]
    fn the_hash_covers_route_and_body() {
        let a = request_hash("/v1/chat/completions", b"{}");
        assert_eq!(a, request_hash("/v1/chat/completions", b"{}"));
        assert_ne!(a, request_hash("/v1/messages", b"{}"));
        assert_ne!(a, request_hash("/v1/chat/completions", b"{ }"));
        // The separator keeps a path's end from passing for the body's start.
        assert_ne!(request_hash("/a", b"b"), request_hash("/ab", b""));
    }
}
