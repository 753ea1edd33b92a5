//! The channel webhooks: Telegram, WhatsApp (Cloud API and 360dialog) and Instagram.
//!
//! Each route is off (404) until its secret is configured. The secret is checked first, in
//! constant time, on the raw body and before anything parses it (Meta's signed routes read
//! their body before taking a slot, in the pool of `crate::front_door::signed`, and check
//! it there first); then the body is parsed
//! into normalized messages and each is accepted (deduped, rate limited, confirmed by the
//! broker). The platform gets 2xx only when everything it sent is safely queued, and 503
//! otherwise so that it retries (what was queued is deduped on the retry).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::model::{Inbound, MessageEvent, Platform};
use hermes_types::trace::TraceParent;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::json;

use crate::accept::{self, Accepted};
use crate::channels::{ParseError, instagram, telegram, telegram_groups, verify, whatsapp};
use crate::{AppState, body_or_error};

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

/// A body that did not parse (400), or one with more items than any platform sends (413).
fn unparsed(app: &AppState, platform: Platform, e: ParseError) -> Response {
    if let ParseError::TooMany(_) = e {
        return refused(
            app,
            platform,
            e.reason(),
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ApiErrorCode::TooManyItems,
                e.to_string(),
            ),
        );
    }
    malformed(app, platform, e)
}

fn malformed(app: &AppState, platform: Platform, e: impl std::fmt::Display) -> Response {
    refused(
        app,
        platform,
        "malformed",
        ApiError::bad_request(
            ApiErrorCode::MalformedPayload,
            format!("payload not understood: {e}"),
        ),
    )
}

/// The caller's W3C trace context, continued as a child span (`None` without a valid one).
pub(crate) fn traceparent(headers: &HeaderMap) -> Option<TraceParent> {
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(TraceParent::parse)
        .map(|t| t.child())
}

/// Accept every event of one webhook call; 503 if any could not be queued.
async fn accept_all(app: &AppState, events: Vec<MessageEvent>, headers: &HeaderMap) -> Response {
    accept_inbound(app, events.into_iter().map(Inbound::of).collect(), headers).await
}

/// Accept every message of one webhook call; 503 if any could not be queued.
async fn accept_inbound(app: &AppState, messages: Vec<Inbound>, headers: &HeaderMap) -> Response {
    let (mut routed, mut delayed) = (0usize, 0usize);
    for inbound in messages {
        match accept::accept(app, inbound, traceparent(headers)).await {
            Ok(Accepted::Routed(_)) => routed += 1,
            Ok(Accepted::Delayed(_)) => delayed += 1,
            Ok(Accepted::Duplicate(_) | Accepted::RateLimited { .. }) => {}
            Err(e) => return e.into_response(),
        }
    }
    Json(json!({ "ok": true, "routed": routed, "delayed": delayed })).into_response()
}

/// The raw body, or the refusal (with its metric reason) for one too large or unreadable.
fn body(
    app: &AppState,
    platform: Platform,
    body: Result<Bytes, BytesRejection>,
) -> Result<Bytes, (&'static str, ApiError)> {
    let c = &app.ctx.config;
    let limit = match platform {
        Platform::Whatsapp | Platform::Instagram => c.meta_max_body_bytes,
        _ => c.max_body_bytes,
    };
    body_or_error(limit, body).map_err(|e| {
        let reason = if e.status == StatusCode::PAYLOAD_TOO_LARGE {
            "too_large"
        } else {
            "malformed"
        };
        (reason, e)
    })
}

/// The raw body of a Meta webhook (WhatsApp Cloud API, Instagram) once its
/// `X-Hub-Signature-256` matches `secret`; `Err` is the response to send instead.
fn hub_signed_body(
    app: &AppState,
    platform: Platform,
    secret: Option<&SecretString>,
    headers: &HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Result<Bytes, Box<Response>> {
    let Some(secret) = secret else {
        return Err(Box::new(not_configured(app, platform)));
    };
    let raw = body(app, platform, raw)
        .map_err(|(reason, e)| Box::new(refused(app, platform, reason, e)))?;
    let signature = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok());
    if !verify::hub_signature_valid(secret.expose_secret().as_bytes(), &raw, signature) {
        return Err(Box::new(bad_signature(app, platform)));
    }
    Ok(raw)
}

/// `POST /webhooks/telegram`
pub async fn telegram(
    State(app): State<AppState>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    // The secret header was checked by [`telegram_gate`], before the body was read.
    let p = Platform::Telegram;
    let raw = match body(&app, p, raw) {
        Ok(b) => b,
        Err((reason, e)) => return refused(&app, p, reason, e),
    };
    let update = match telegram::parse(&raw) {
        Err(e) => return malformed(&app, p, e),
        Ok(update) => update,
    };
    let (Some(event), Some(facts)) = (update.event, update.addressing) else {
        return skipped(&app, p, "ignored");
    };
    // Groups and edits (docs/channels.md, "Group chats"): a message not for the bot is
    // acknowledged, counted, and creates no run.
    let c = &app.ctx.config;
    let settings = &c.file.channels.telegram;
    let token = c.delivery.telegram.as_ref().map(|t| &t.bot_token);
    let bot = telegram_groups::Bot::new(settings, token.map(|t| t.expose_secret()));
    match telegram_groups::admit(event, &facts, settings, &bot) {
        Ok(inbound) => accept_inbound(&app, vec![inbound], &headers).await,
        Err(why) => skipped(&app, p, why.as_str()),
    }
}

/// Acknowledge a message that is not routed, counted under `outcome`.
fn skipped(app: &AppState, platform: Platform, outcome: &str) -> Response {
    app.ctx
        .metrics
        .http
        .ingest_messages
        .with_label_values(&[platform.as_str(), outcome])
        .inc();
    Json(json!({ "ok": true, "routed": 0, "delayed": 0 })).into_response()
}

/// Query of Meta's subscription handshake.
#[derive(Deserialize)]
pub struct Handshake {
    #[serde(rename = "hub.mode")]
    mode: Option<String>,
    #[serde(rename = "hub.verify_token")]
    token: Option<String>,
    #[serde(rename = "hub.challenge")]
    challenge: Option<String>,
}

fn handshake(
    app: &AppState,
    platform: Platform,
    expected: Option<&SecretString>,
    q: Handshake,
) -> Response {
    let Some(expected) = expected else {
        return not_configured(app, platform);
    };
    match verify::handshake(
        expected.expose_secret(),
        q.mode.as_deref(),
        q.token.as_deref(),
        q.challenge.as_deref(),
    ) {
        Some(challenge) => (StatusCode::OK, challenge).into_response(),
        None => bad_signature(app, platform),
    }
}

/// `GET /webhooks/whatsapp`
pub async fn whatsapp_handshake(
    State(app): State<AppState>,
    Query(q): Query<Handshake>,
) -> Response {
    let expected = app.ctx.config.channels.whatsapp_verify_token.clone();
    handshake(&app, Platform::Whatsapp, expected.as_ref(), q)
}

/// `GET /webhooks/instagram`
pub async fn instagram_handshake(
    State(app): State<AppState>,
    Query(q): Query<Handshake>,
) -> Response {
    let expected = app.ctx.config.channels.instagram_verify_token.clone();
    handshake(&app, Platform::Instagram, expected.as_ref(), q)
}

/// The Cloud API payload, however it was authenticated: statuses are recorded, messages accepted.
async fn whatsapp_payload(app: &AppState, headers: &HeaderMap, raw: &[u8]) -> Response {
    let p = Platform::Whatsapp;
    let batch = match whatsapp::parse(raw) {
        Ok(b) => b,
        Err(e) => return unparsed(app, p, e),
    };
    if !batch.statuses.is_empty() {
        if let Err(e) = crate::statuses::record(&app.ctx, &batch.statuses).await {
            tracing::error!(error = %e, "cannot record WhatsApp statuses");
            return refused(
                app,
                p,
                "unavailable",
                ApiError::unavailable("statuses could not be recorded; retry shortly"),
            );
        }
        app.ctx
            .metrics
            .http
            .ingest_messages
            .with_label_values(&[p.as_str(), "status_recorded"])
            .inc_by(batch.statuses.len() as u64);
    }
    if batch.ignored > 0 {
        app.ctx
            .metrics
            .http
            .ingest_messages
            .with_label_values(&[p.as_str(), "ignored"])
            .inc_by(batch.ignored as u64);
    }
    accept_all(app, batch.messages, headers).await
}

/// `POST /webhooks/whatsapp` (Cloud API, signed with the app secret)
pub async fn whatsapp(
    State(app): State<AppState>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    let secret = app.ctx.config.channels.whatsapp_app_secret.clone();
    match hub_signed_body(&app, Platform::Whatsapp, secret.as_ref(), &headers, raw) {
        Ok(raw) => whatsapp_payload(&app, &headers, &raw).await,
        Err(refusal) => *refusal,
    }
}

fn d360_token_ok(app: &AppState, headers: &HeaderMap, path_token: Option<&str>) -> Option<bool> {
    let channels = &app.ctx.config.channels;
    let expected = channels.d360_webhook_token.as_ref()?;
    let given = path_token.or_else(|| {
        headers
            .get(channels.d360_token_header.as_str())
            .and_then(|v| v.to_str().ok())
    });
    Some(verify::token_matches(expected.expose_secret(), given))
}

async fn d360(app: AppState, headers: HeaderMap, raw: Result<Bytes, BytesRejection>) -> Response {
    // The token was checked by [`d360_gate`], before the body was read.
    let p = Platform::Whatsapp;
    let raw = match body(&app, p, raw) {
        Ok(b) => b,
        Err((reason, e)) => return refused(&app, p, reason, e),
    };
    whatsapp_payload(&app, &headers, &raw).await
}

/// `POST /webhooks/360dialog` (token in the configured header)
pub async fn d360_header(
    State(app): State<AppState>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    d360(app, headers, raw).await
}

/// `POST /webhooks/360dialog/{token}` (token in the path, for setups that cannot add headers)
pub async fn d360_path(
    State(app): State<AppState>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    d360(app, headers, raw).await
}

/// `POST /webhooks/instagram`
pub async fn instagram(
    State(app): State<AppState>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    let p = Platform::Instagram;
    let secret = app.ctx.config.channels.instagram_app_secret.clone();
    let raw = match hub_signed_body(&app, p, secret.as_ref(), &headers, raw) {
        Ok(raw) => raw,
        Err(refusal) => return *refusal,
    };
    match instagram::parse(&raw) {
        Err(e) => unparsed(&app, p, e),
        Ok(events) => accept_all(&app, events, &headers).await,
    }
}

/// The refusal of a request whose header secret is missing or wrong (`None`: let it in).
/// The gates below run before the handler's body extractor: a caller without the secret is
/// answered at once and never gets to hold a connection by sending its body slowly.
fn gate_verdict(app: &AppState, platform: Platform, verdict: Option<bool>) -> Option<Response> {
    match verdict {
        None => Some(not_configured(app, platform)),
        Some(false) => Some(bad_signature(app, platform)),
        Some(true) => None,
    }
}

/// Middleware of `POST /webhooks/telegram`: `X-Telegram-Bot-Api-Secret-Token`, checked in
/// constant time before the body is read.
pub async fn telegram_gate(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let verdict = app
        .ctx
        .config
        .channels
        .telegram_webhook_secret
        .as_ref()
        .map(|secret| {
            let given = req
                .headers()
                .get("x-telegram-bot-api-secret-token")
                .and_then(|v| v.to_str().ok());
            verify::token_matches(secret.expose_secret(), given)
        });
    match gate_verdict(&app, Platform::Telegram, verdict) {
        Some(refusal) => refusal,
        None => next.run(req).await,
    }
}

/// Middleware of `POST /webhooks/360dialog`: the token header, before the body is read.
pub async fn d360_gate(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let verdict = d360_token_ok(&app, req.headers(), None);
    match gate_verdict(&app, Platform::Whatsapp, verdict) {
        Some(refusal) => refusal,
        None => next.run(req).await,
    }
}

/// Middleware of `POST /webhooks/360dialog/{token}`: the path token, before the body is read.
pub async fn d360_path_gate(
    State(app): State<AppState>,
    Path(token): Path<String>,
    req: Request,
    next: Next,
) -> Response {
    let verdict = d360_token_ok(&app, req.headers(), Some(&token));
    match gate_verdict(&app, Platform::Whatsapp, verdict) {
        Some(refusal) => refusal,
        None => next.run(req).await,
    }
}

/// One start-up line per channel saying whether its routes are on.
pub fn log_channels(app: &AppState) {
    let c = &app.ctx.config.channels;
    let routes = [
        (
            "POST /webhooks/telegram",
            c.telegram_webhook_secret.is_some(),
        ),
        ("GET /webhooks/whatsapp", c.whatsapp_verify_token.is_some()),
        ("POST /webhooks/whatsapp", c.whatsapp_app_secret.is_some()),
        ("POST /webhooks/360dialog", c.d360_webhook_token.is_some()),
        (
            "GET /webhooks/instagram",
            c.instagram_verify_token.is_some(),
        ),
        ("POST /webhooks/instagram", c.instagram_app_secret.is_some()),
    ];
    for (route, on) in routes {
        let state = if on {
            "on"
        } else {
            "off (404): secret not set"
        };
        tracing::info!(route, state, "channel route");
    }
    let telegram = &app.ctx.config.file.channels.telegram;
    if c.telegram_webhook_secret.is_some() && telegram.username().is_none() {
        tracing::warn!(
            "[channels.telegram] bot_username is not set: in groups the bot hears replies to it and bare commands, not @mentions"
        );
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
