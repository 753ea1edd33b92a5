//! The channel webhooks, whatever the platform (docs/channels.md, "Inbound webhooks"): every
//! route of [`hermes_channels::inbound::webhooks`] mounted and served the same way. What
//! differs per platform (which header or signature proves the sender, what the body says)
//! is asked of its [`Webhook`]; what is kept here is generic.
//!
//! Each route is off (404) until its secret is configured. The secret is checked first, in
//! constant time: a token before the body is read ([`gate`]), a signature on the raw body
//! read in the pool of `crate::front_door::signed` before the request takes a slot. Then the
//! body is parsed into normalized messages and each is accepted (deduped, rate limited,
//! confirmed by the broker). The platform gets 2xx only when everything it sent is safely
//! queued, and 503 otherwise so that it retries (what was queued is deduped on the retry);
//! a platform that retries slow answers (Slack, 3 s) gets its 503 within that bound. A
//! subscription check sent as a `POST` (Slack's `url_verification`) is answered with its
//! challenge once the signature holds.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Json, Router};
use hermes_channels::ParseError;
use hermes_channels::inbound::{self, Auth, Consent, Refusal, Webhook};
use hermes_db::DbError;
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::model::{Inbound, Platform};
use hermes_types::trace::TraceParent;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::front_door::signed::{SignedRoute, Unverified, read_signed};
use crate::{AppState, body_or_error, bound_in_flight};
use hermes_runtime::accept::{self, Accepted};

/// One platform's webhook route, as registered.
pub(crate) type Hook = Arc<dyn Webhook>;

pub(crate) fn refused(
    app: &AppState,
    platform: Platform,
    reason: &'static str,
    e: ApiError,
) -> Response {
    app.ctx
        .metrics
        .http
        .ingest_messages
        .with_label_values(&[platform.as_str(), reason])
        .inc();
    e.into_response()
}

pub(crate) fn not_configured(app: &AppState, platform: Platform) -> Response {
    refused(
        app,
        platform,
        "not_configured",
        ApiError::new(
            StatusCode::NOT_FOUND,
            ApiErrorCode::NotFound,
            format!("the {} channel is not configured", platform.as_str()),
        ),
    )
}

pub(crate) fn bad_signature(app: &AppState, platform: Platform) -> Response {
    refused(
        app,
        platform,
        "bad_signature",
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            ApiErrorCode::InvalidSignature,
            "signature or token is missing or wrong",
        ),
    )
}

/// The answer to a request a webhook refused to verify.
pub(crate) fn refusal(app: &AppState, platform: Platform, why: Refusal) -> Response {
    match why {
        Refusal::Off => not_configured(app, platform),
        Refusal::BadSignature => bad_signature(app, platform),
    }
}

/// A body that did not parse (400), or one with more items than any platform sends (413).
fn unparsed(app: &AppState, platform: Platform, e: ParseError) -> Response {
    let error = match e {
        ParseError::TooMany(_) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ApiErrorCode::TooManyItems,
            e.to_string(),
        ),
        _ => ApiError::bad_request(
            ApiErrorCode::MalformedPayload,
            format!("payload not understood: {e}"),
        ),
    };
    refused(app, platform, e.reason(), error)
}

/// The trace the accepted message continues: the request's server span when tracing is on
/// (itself a child of the caller's `traceparent`), else the caller's W3C trace context
/// continued as a child span (`None` without a valid one).
pub(crate) fn traceparent(headers: &HeaderMap) -> Option<TraceParent> {
    hermes_telemetry::trace::traceparent_of(&tracing::Span::current()).or_else(|| {
        headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .and_then(TraceParent::parse)
            .map(|t| t.child())
    })
}

/// Accept every message of one webhook call; 503 if any could not be queued.
async fn accept_all(app: &AppState, messages: Vec<Inbound>, headers: &HeaderMap) -> Response {
    let (mut routed, mut delayed) = (0usize, 0usize);
    for inbound in messages {
        match accept::accept(&app.intake, inbound, traceparent(headers)).await {
            Ok(Accepted::Routed(_)) => routed += 1,
            Ok(Accepted::Delayed(_)) => delayed += 1,
            Ok(Accepted::Duplicate(_) | Accepted::RateLimited { .. }) => {}
            Err(e) => return e.into_response(),
        }
    }
    Json(json!({ "ok": true, "routed": routed, "delayed": delayed })).into_response()
}

/// Count `n` messages of `platform` under `outcome`.
fn count(app: &AppState, platform: Platform, outcome: &str, n: usize) {
    app.ctx
        .metrics
        .http
        .ingest_messages
        .with_label_values(&[platform.as_str(), outcome])
        .inc_by(n as u64);
}

/// `POST {path}`: the body read within the route's limit and checked (a signed one was,
/// in the pool of unverified bodies, before it got here), then parsed; its statuses are
/// recorded, what it skips counted, and its messages accepted.
async fn receive(
    app: AppState,
    hook: Hook,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    let p = hook.platform();
    let raw = match body_or_error(hook.max_body_bytes(), raw) {
        Ok(raw) => raw,
        Err(e) if e.status == StatusCode::PAYLOAD_TOO_LARGE => {
            return refused(&app, p, "too_large", e);
        }
        Err(e) => return refused(&app, p, "malformed", e),
    };
    if let Auth::Token { .. } = hook.auth()
        && let Err(why) = hook.check_body(&headers, &raw)
    {
        return refusal(&app, p, why);
    }
    let received = match hook.parse(&raw) {
        Ok(received) => received,
        Err(e) => return unparsed(&app, p, e),
    };
    if !received.statuses.is_empty() {
        if let Err(e) = crate::statuses::record(&app.ctx, &received.statuses).await {
            tracing::error!(error = %e, platform = p.as_str(), "cannot record delivery statuses");
            return refused(
                &app,
                p,
                "unavailable",
                ApiError::unavailable("statuses could not be recorded; retry shortly"),
            );
        }
        count(&app, p, "status_recorded", received.statuses.len());
    }
    if !received.consents.is_empty() {
        if let Err(e) = record_consents(&app, &received.consents).await {
            tracing::error!(error = %e, platform = p.as_str(), "cannot record an opt-out");
            return refused(
                &app,
                p,
                "unavailable",
                ApiError::unavailable("the opt-out could not be recorded; retry shortly"),
            );
        }
        count(&app, p, "consent_recorded", received.consents.len());
    }
    for (why, n) in received.skipped {
        count(&app, p, why.as_str(), n);
    }
    if let Some(challenge) = received.challenge {
        count(&app, p, "challenge", 1);
        return Json(json!({ "challenge": challenge })).into_response();
    }
    let accepted = match hook.ack_within() {
        None => accept_all(&app, received.messages, &headers).await,
        Some(bound) => {
            // The platform retries an answer slower than `bound` anyway: answer 503 by then,
            // and let the accepting finish on its own task, so what it confirms is deduped on
            // the retry.
            let (a, h) = (app.clone(), headers.clone());
            let work = tokio::spawn(async move { accept_all(&a, received.messages, &h).await });
            match tokio::time::timeout(bound, work).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) | Err(_) => {
                    return refused(
                        &app,
                        p,
                        "ack_timeout",
                        ApiError::unavailable(format!(
                            "the message could not be queued within {} ms; retry",
                            bound.as_millis()
                        )),
                    );
                }
            }
        }
    };
    match received.answer {
        // The platform's own acknowledgement (Twilio's TwiML), once everything is accepted.
        Some(answer) if accepted.status().is_success() => (
            StatusCode::OK,
            [(CONTENT_TYPE, answer.content_type)],
            answer.body,
        )
            .into_response(),
        _ => accepted,
    }
}

/// Record each opt-out and opt-in (an SMS `STOP` or `START`) before the platform is answered,
/// so no send reaches a person who said `STOP` (docs/channels.md, "SMS through Twilio").
async fn record_consents(app: &AppState, consents: &[Consent]) -> Result<(), DbError> {
    let client = app.ctx.db.get().await?;
    for c in consents {
        hermes_db::opt_outs::record(
            &client,
            c.platform,
            &c.sender_id,
            c.opted_out,
            c.message_id.as_deref(),
        )
        .await?;
        tracing::info!(
            platform = c.platform.as_str(),
            opted_out = c.opted_out,
            "a sender changed their consent to messages"
        );
    }
    Ok(())
}

/// `GET {path}`: the platform's subscription handshake, the challenge echoed as plain text.
async fn handshake(app: AppState, hook: Hook, query: Option<String>) -> Response {
    let answer = match hook.handshake() {
        Some(h) => h.answer(query.as_deref()),
        None => Err(Refusal::Off),
    };
    match answer {
        Ok(challenge) => (StatusCode::OK, challenge).into_response(),
        Err(why) => refusal(&app, hook.platform(), why),
    }
}

/// Middleware of a token route: its check, before the body is read, so a caller without the
/// secret is answered at once and never gets to hold a connection by sending its body slowly.
async fn gate(State((app, hook)): State<(AppState, Hook)>, req: Request, next: Next) -> Response {
    match hook.check_headers(req.headers(), None) {
        Ok(()) => next.run(req).await,
        Err(why) => refusal(&app, hook.platform(), why),
    }
}

/// [`gate`] of a route with the token in its path (`{path}/{token}`).
async fn gate_path_token(
    State((app, hook)): State<(AppState, Hook)>,
    Path(token): Path<String>,
    req: Request,
    next: Next,
) -> Response {
    match hook.check_headers(req.headers(), Some(&token)) {
        Ok(()) => next.run(req).await,
        Err(why) => refusal(&app, hook.platform(), why),
    }
}

/// The handler of `POST` on `hook`'s route.
fn receiver(hook: &Hook) -> MethodRouter<AppState> {
    let hook = hook.clone();
    post(
        move |State(app): State<AppState>,
              headers: HeaderMap,
              raw: Result<Bytes, BytesRejection>| {
            receive(app, hook.clone(), headers, raw)
        },
    )
}

/// Every platform's webhook routes, each taking one of `slots` once its caller is known: a
/// token route behind its [`gate`], a signed route behind the pool of `unverified` bodies;
/// each with the body limit of its platform (Meta's carry up to 3 MB).
pub(crate) fn routes(
    state: &AppState,
    slots: Arc<Semaphore>,
    unverified: &Unverified,
) -> Router<AppState> {
    let slot = middleware::from_fn_with_state((state.clone(), slots), bound_in_flight);
    let mut router = Router::new();
    for hook in inbound::webhooks(&state.ctx.config) {
        let hooked = (state.clone(), hook.clone());
        let post_route = receiver(&hook).layer(slot.clone());
        let post_route = match hook.auth() {
            Auth::Token { .. } => {
                post_route.layer(middleware::from_fn_with_state(hooked.clone(), gate))
            }
            Auth::Signature => post_route.layer(middleware::from_fn_with_state(
                (unverified.clone(), SignedRoute::Channel(hook.clone())),
                read_signed,
            )),
        };
        let method_router = match hook.handshake() {
            Some(_) => {
                let h = hook.clone();
                get(move |State(app): State<AppState>, RawQuery(q): RawQuery| {
                    handshake(app, h.clone(), q)
                })
                .layer(slot.clone())
                .merge(post_route)
            }
            None => post_route,
        };
        let mut routes = Router::new().route(hook.path(), method_router);
        if let Auth::Token { in_path: true } = hook.auth() {
            routes = routes.route(
                &format!("{}/{{token}}", hook.path()),
                receiver(&hook)
                    .layer(slot.clone())
                    .layer(middleware::from_fn_with_state(hooked, gate_path_token)),
            );
        }
        router = router.merge(routes.layer(DefaultBodyLimit::max(hook.max_body_bytes())));
    }
    router
}

/// One start-up line per channel route saying whether it is on.
pub fn log_channels(app: &AppState) {
    let state = |on: bool| {
        if on {
            "on"
        } else {
            "off (404): secret not set"
        }
    };
    for hook in inbound::webhooks(&app.ctx.config) {
        if let Some(h) = hook.handshake() {
            let route = format!("GET {}", hook.path());
            tracing::info!(route, state = state(h.enabled()), "channel route");
        }
        let route = format!("POST {}", hook.path());
        tracing::info!(route, state = state(hook.enabled()), "channel route");
        for warning in hook.warnings() {
            tracing::warn!("{warning}");
        }
    }
    let forge = &app.ctx.config.forge;
    let state = match (forge.enabled(), forge.body_signature) {
        (false, _) => "not mounted (404): HERMES_FORGE_WEBHOOK_SECRETS not set",
        (true, false) => "on (X-Forge-Signature over timestamp and body)",
        (true, true) => "on (X-Forge-Body-Signature: the body alone)",
    };
    tracing::info!(
        route = format!("POST {}", forge.path),
        state,
        "Forge wake route"
    );
}
