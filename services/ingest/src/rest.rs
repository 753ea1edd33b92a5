//! The generic REST channel for a customer's own app: `POST /v1/messages` queues a message
//! and answers `202` with its run id; the answer is POSTed to the callback URL of the
//! caller's key, or read from `GET /v1/runs/{id}` (in [`crate::runs`]).
//!
//! Callers authenticate with a key made by `hermes api-keys create` (only its hash is
//! stored) or with `API_SERVER_KEY`, which may read every run. The same resolution guards the
//! OpenAI-compatible API: a key reaches a surface only with its scope (`messages`, `chat`)
//! and within its request rate (docs/security.md, keys and tenants).

use std::net::IpAddr;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hermes_cache::rate_limit::Verdict;
use hermes_channels::rest::RestError;
use hermes_db::api_keys::{self, ApiKey, KeyScope};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::ids::RunId;
use hermes_types::model::{Inbound, Platform};
use serde_json::json;

use crate::front_door::Client;
use crate::request_id;
use crate::{AppState, api_body};
use hermes_runtime::accept::{self, Accepted};

/// Who is calling the REST channel.
#[derive(Clone, Debug)]
pub enum Caller {
    /// `API_SERVER_KEY`: may read every run; its answers are polled.
    Operator,
    /// A key from `api_keys` (boxed: a key record is large, the operator is nothing).
    Key(Box<ApiKey>),
}

impl Caller {
    /// The key's id (`None` for the operator).
    pub fn key_id(&self) -> Option<hermes_types::ids::ApiKeyId> {
        match self {
            Caller::Operator => None,
            Caller::Key(k) => Some(k.id),
        }
    }

    fn may(&self, scope: KeyScope) -> bool {
        match self {
            Caller::Operator => true,
            Caller::Key(k) => k.scopes.contains(&scope),
        }
    }
}

/// The caller a key names (`None`: no such live key), from the caches of
/// [`crate::front_door::keys`]. A key not known as live is looked up only while `client`
/// (the request's address; `None` for no per-client limit) is within its unknown keys
/// (`HERMES_KEY_MISSES_PER_MINUTE`): beyond, `429 too_many_unknown_keys` without a look-up.
/// Every unknown key counts against its client.
pub(crate) async fn resolve(
    app: &AppState,
    key: &str,
    client: Option<IpAddr>,
) -> Result<Option<Caller>, ApiError> {
    if crate::auth::ApiKey(app.ctx.config.ingest.api_server_key.clone()).is_operator_key(key) {
        return Ok(Some(Caller::Operator));
    }
    let hash = api_keys::hash(key);
    if let Some(found) = app.keys.live(&hash) {
        return Ok(Some(Caller::Key(Box::new(found))));
    }
    let misses = &app.ctx.metrics.front_door.key_misses;
    if let Some(wait) = client.and_then(|c| app.keys.wait(&hash, c)) {
        misses.with_label_values(&["rate_limited"]).inc();
        let per_minute = app.ctx.config.ingest.front_door.key_misses_per_minute;
        return Err(ApiError {
            retry_after: Some(wait.as_secs_f64().ceil().max(1.0) as u64),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ApiErrorCode::TooManyUnknownKeys,
                format!(
                    "this address sent more than {per_minute} unknown API keys a minute (HERMES_KEY_MISSES_PER_MINUTE)"
                ),
            )
        });
    }
    let outcome = if app.keys.known_miss(&hash) {
        "cached"
    } else {
        let db = app
            .ctx
            .db
            .get()
            .await
            .map_err(|_| ApiError::unavailable("cannot check the key right now"))?;
        let found = api_keys::find(&db, key)
            .await
            .map_err(|_| ApiError::unavailable("cannot check the key right now"))?;
        app.keys.remember(hash, found.as_ref());
        if let Some(found) = found {
            return Ok(Some(Caller::Key(Box::new(found))));
        }
        "looked_up"
    };
    misses.with_label_values(&[outcome]).inc();
    if let Some(client) = client {
        app.keys.limiter.take(client);
    }
    Ok(None)
}

/// Middleware of the REST channel: a [`Caller`] with the `messages` scope, before the body
/// is read.
pub async fn require_caller(State(app): State<AppState>, req: Request, next: Next) -> Response {
    authorize(app, req, next, &[KeyScope::Messages]).await
}

/// Middleware of the OpenAI-compatible API: a [`Caller`] with the `chat` scope. Without an
/// `API_SERVER_KEY` (allowed only on a loopback address) a request without a key is the
/// operator's, as before keys existed.
pub async fn require_chat_caller(
    State(app): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    open_or_authorize(app, req, next, &[KeyScope::Chat]).await
}

/// Middleware of a run's own routes (`GET /v1/runs/{id}`, its events, its stop): runs are
/// made by the REST channel and by the OpenAI-compatible API, so a key with either scope
/// passes; which runs it may see is checked by the route (its own only).
pub async fn require_run_caller(State(app): State<AppState>, req: Request, next: Next) -> Response {
    open_or_authorize(app, req, next, &[KeyScope::Chat, KeyScope::Messages]).await
}

/// Without an `API_SERVER_KEY` (allowed only on a loopback address) a request without a key
/// is the operator's; otherwise [`authorize`].
async fn open_or_authorize(
    app: AppState,
    mut req: Request,
    next: Next,
    scopes: &[KeyScope],
) -> Response {
    if app.ctx.config.ingest.api_server_key.is_none() && bearer(&req).is_none() {
        req.extensions_mut().insert(Caller::Operator);
        return next.run(req).await;
    }
    authorize(app, req, next, scopes).await
}

/// Middleware of the workspace and settings routes (`/workspaces`, `/settings/secrets`): the
/// operator key or a key with the `operator` scope; without an `API_SERVER_KEY` (loopback
/// only) a request without a key is the operator's, as the document's examples send them.
pub async fn require_operator_caller(
    State(app): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    open_or_authorize(app, req, next, &[KeyScope::Operator]).await
}

/// Middleware of A2A (`/workspaces/{id}/a2a` and its agent card, docs/a2a.md): the
/// operator key or a key with the `a2a` scope; without an `API_SERVER_KEY` (loopback only) a
/// request without a key is the operator's.
pub async fn require_a2a_caller(State(app): State<AppState>, req: Request, next: Next) -> Response {
    open_or_authorize(app, req, next, &[KeyScope::A2a]).await
}

/// Middleware of `/api/jobs`: a [`Caller`] with the `jobs` scope.
pub async fn require_jobs_caller(
    State(app): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    authorize(app, req, next, &[KeyScope::Jobs]).await
}

/// One request taken from `key`'s request rate, when it has one: `Some(seconds to wait)`
/// when it is over. Like every rate limit, Redis trouble lets the request through.
pub(crate) async fn over_rate(app: &AppState, key: &ApiKey) -> Option<u64> {
    let per_minute = key.limits.requests_per_minute?;
    let limit = hermes_config::RateLimit {
        per_minute,
        burst: per_minute,
    };
    match app
        .intake
        .limiter
        .take(&format!("key:{}", key.id), limit)
        .await
    {
        Ok(Verdict::Limited { retry_after }) => {
            Some(retry_after.as_secs_f64().ceil().max(1.0) as u64)
        }
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, "key rate unavailable; letting the request through");
            None
        }
    }
}

fn bearer(req: &Request) -> Option<String> {
    bearer_of(req.headers())
}

/// The key of an `Authorization: Bearer …` header.
pub(crate) fn bearer_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
}

/// Resolve the Bearer key, check it has one of `scopes` and take one request from its rate.
async fn authorize(app: AppState, mut req: Request, next: Next, scopes: &[KeyScope]) -> Response {
    let Some(key) = bearer(&req) else {
        return ApiError::unauthorized().into_response();
    };
    let client = req.extensions().get::<Client>().and_then(|c| c.0);
    let caller = match resolve(&app, &key, client).await {
        Ok(Some(caller)) => caller,
        Ok(None) => return ApiError::unauthorized().into_response(),
        Err(e) => return e.into_response(),
    };
    let Some(scope) = scopes.iter().copied().find(|s| caller.may(*s)) else {
        let names: Vec<&str> = scopes.iter().map(|s| s.as_str()).collect();
        return ApiError::new(
            StatusCode::FORBIDDEN,
            ApiErrorCode::Forbidden,
            format!("this key lacks the {} scope", names.join(" or ")),
        )
        .into_response();
    };
    if let Caller::Key(k) = &caller
        && let Some(secs) = over_rate(&app, k).await
    {
        let surface = match scope {
            KeyScope::Messages => Platform::Rest,
            KeyScope::Chat | KeyScope::Jobs | KeyScope::Operator | KeyScope::A2a => Platform::Api,
        };
        app.ctx
            .metrics
            .http
            .ingest_messages
            .with_label_values(&[surface.as_str(), "rate_limited"])
            .inc();
        return ApiError {
            retry_after: Some(secs),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ApiErrorCode::RateLimited,
                "this key is over its request rate",
            )
        }
        .into_response();
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// `POST /v1/messages`
pub async fn post_message(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let refuse = |e: ApiError| {
        app.ctx
            .metrics
            .http
            .ingest_messages
            .with_label_values(&["rest", e.code.as_str()])
            .inc();
        e.into_response()
    };
    let body = match api_body(app.ctx.config.ingest.max_body_bytes, body) {
        Ok(b) => b,
        Err(e) => return refuse(e),
    };
    let event = match hermes_channels::rest::parse(&body) {
        Ok(e) => e,
        Err(e @ RestError::NotAMessage(_)) => {
            return refuse(ApiError::bad_request(
                ApiErrorCode::InvalidJson,
                e.to_string(),
            ));
        }
        Err(RestError::Invalid(why)) => {
            return refuse(ApiError::bad_request(ApiErrorCode::InvalidRequest, why));
        }
    };
    // Without a message id, the caller's request id names the run (docs/api.md, retrying
    // safely); a message id is deduplicated as it is.
    let run = match request_id::of(&headers) {
        Ok(Some(id)) if event.external_message_id.is_none() => {
            request_id::run_for(&caller, request_id::Surface::Rest, &id, &body)
        }
        Ok(_) => RunId::new(),
        Err(e) => return refuse(e),
    };
    let (callback_url, api_key_id) = match &caller {
        Caller::Operator => (None, None),
        Caller::Key(k) => (k.callback_url.clone(), Some(k.id)),
    };
    let inbound = Inbound {
        callback_url,
        api_key_id,
        ..Inbound::of(event)
    };
    match accept::accept_as(&app.intake, inbound, None, run).await {
        // A REST caller over its rate is answered 429 (below), never delayed.
        Ok(Accepted::Routed(run) | Accepted::Delayed(run)) => (
            StatusCode::ACCEPTED,
            Json(json!({ "run_id": run, "status": "accepted", "poll": format!("/v1/runs/{run}") })),
        )
            .into_response(),
        // A repeat is told the run that answers the first copy (docs/api.md, idempotency).
        Ok(Accepted::Duplicate(Some(run))) => {
            Json(json!({ "run_id": run, "status": "duplicate", "poll": format!("/v1/runs/{run}") }))
                .into_response()
        }
        Ok(Accepted::Duplicate(None)) => Json(json!({ "status": "duplicate" })).into_response(),
        Ok(Accepted::RateLimited { retry_after }) => {
            let secs = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            ApiError {
                retry_after: Some(secs),
                ..ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    ApiErrorCode::RateLimited,
                    "this sender is over its message rate",
                )
            }
            .into_response()
        }
        Err(e) => e.into_response(),
    }
}
