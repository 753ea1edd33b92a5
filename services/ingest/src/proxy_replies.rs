//! `POST /proxy/replies` (docs/api.md, "Proxy mode"): where an edge install takes back the
//! answers of the messages its router forwarded upstream. The upstream posts each answer as
//! a REST callback, signed in the Standard Webhooks scheme with the key's secret
//! (`GATEWAY_PROXY_SECRET`), its `message_id` naming the edge's own run. Mounted only in
//! proxy mode.
//!
//! In order: the signature is checked on the raw body, read in the pool of unverified bodies
//! before the request takes a slot (`front_door::signed`); the forwarded run is looked up;
//! its reply goes to this install's delivery with the broker's confirm, under an id derived
//! from the callback's `webhook-id`, so a callback the upstream sends again is delivered
//! once. Only then is it answered 200: an answer this install could not take is sent again.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hermes_db::proxied;
use hermes_net::signing::{
    WEBHOOK_ID, WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP, standard_key, standard_signature_valid,
};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::envelope::Envelope;
use hermes_types::ids::{MessageId, RunId};
use hermes_types::model::{Outcome, Reply};
use secrecy::ExposeSecret;
use serde::Deserialize;
use serde_json::json;

use crate::AppState;

/// How old a signed answer may be (Standard Webhooks' recommended tolerance).
const TOLERANCE_SECS: i64 = 5 * 60;
/// Tags the id of the reply an answer becomes, apart from other messages derived from the
/// same callback id.
const REPLY_TAG: u128 = 0x7072_6f78_795f_7265_706c_7900_0000_0001; // "proxy_reply"

/// The headers the route verifies, each required.
pub const HEADERS: [&str; 3] = [WEBHOOK_ID, WEBHOOK_TIMESTAMP, WEBHOOK_SIGNATURE];

/// The REST callback's body, as the upstream sends it (docs/api.md, "Callbacks").
#[derive(Deserialize)]
struct Answer {
    /// The caller's `message_id`: the edge's run.
    message_id: Option<String>,
    outcome: Outcome,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether the answer is signed with the proxy key's secret, recently; the 401 otherwise.
pub(crate) fn verify_signature(
    app: &AppState,
    headers: &HeaderMap,
    raw: &[u8],
) -> Result<(), ApiError> {
    let unauthorized =
        |code, message: &str| ApiError::new(StatusCode::UNAUTHORIZED, code, message.to_string());
    let Some(proxy) = &app.ctx.config.proxy else {
        return Err(unauthorized(
            ApiErrorCode::InvalidSignature,
            "proxy mode is off",
        ));
    };
    let (Some(id), Some(ts), Some(signature)) = (
        header(headers, WEBHOOK_ID),
        header(headers, WEBHOOK_TIMESTAMP),
        header(headers, WEBHOOK_SIGNATURE),
    ) else {
        return Err(unauthorized(
            ApiErrorCode::MissingSignature,
            "webhook-id, webhook-timestamp and webhook-signature are required",
        ));
    };
    let Ok(ts) = ts.trim().parse::<i64>() else {
        return Err(unauthorized(
            ApiErrorCode::InvalidTimestamp,
            "webhook-timestamp is not Unix seconds",
        ));
    };
    if (chrono::Utc::now().timestamp() - ts).abs() > TOLERANCE_SECS {
        return Err(unauthorized(
            ApiErrorCode::StaleTimestamp,
            "webhook-timestamp is more than 5 minutes away",
        ));
    }
    let key = standard_key(proxy.callback_secret.expose_secret().as_bytes());
    if !standard_signature_valid(&key, id, ts, raw, signature) {
        return Err(unauthorized(
            ApiErrorCode::InvalidSignature,
            "webhook-signature does not verify",
        ));
    }
    Ok(())
}

/// An answer refused before its handler ran (`front_door::signed`), counted as the handler's.
pub(crate) fn refused(app: &AppState, e: ApiError) -> Response {
    count(app, e.code.as_str());
    tracing::info!(code = e.code.as_str(), "proxied answer refused");
    e.into_response()
}

fn unavailable<E>(_: E) -> ApiError {
    ApiError::unavailable("cannot read the forwarded messages right now; retry shortly")
}

fn count(app: &AppState, outcome: &str) {
    app.ctx
        .metrics
        .router
        .proxy_replies
        .with_label_values(&[outcome])
        .inc();
}

/// `POST /proxy/replies`
pub async fn reply(
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match take(&app, &headers, body).await {
        Ok(run) => {
            count(&app, "queued");
            Json(json!({ "ok": true, "run_id": run })).into_response()
        }
        Err(e) => refused(&app, e),
    }
}

async fn take(
    app: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<RunId, ApiError> {
    let body = crate::api_body(app.ctx.config.ingest.max_body_bytes, body)?;
    let callback = header(headers, WEBHOOK_ID)
        .and_then(|id| uuid::Uuid::parse_str(id).ok())
        .ok_or_else(|| {
            ApiError::bad_request(
                ApiErrorCode::InvalidRequest,
                "webhook-id is not a Hermes message id",
            )
        })?;
    let answer: Answer = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(
            ApiErrorCode::MalformedPayload,
            format!("not a Hermes callback: {e}"),
        )
    })?;
    let run = answer
        .message_id
        .as_deref()
        .and_then(|id| id.parse::<uuid::Uuid>().ok())
        .map(RunId::from)
        .ok_or_else(|| {
            ApiError::bad_request(
                ApiErrorCode::InvalidRequest,
                "message_id does not name a forwarded run",
            )
        })?;
    let client = app.ctx.db.get().await.map_err(unavailable)?;
    let reply_to = proxied::reply_to(&client, run)
        .await
        .map_err(unavailable)?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                ApiErrorCode::NotFound,
                format!("this install forwarded no run {run}"),
            )
        })?;
    drop(client);
    let reply = Reply {
        reply_to,
        outcome: answer.outcome,
        exchange: None,
        detail: None,
        draft_id: None,
        operator: None,
        calls: Vec::new(),
    };
    let traceparent =
        hermes_db::runs::traceparent(&app.ctx.db.get().await.map_err(unavailable)?, run)
            .await
            .ok()
            .flatten();
    let mut envelope = Envelope::new(run, traceparent, &reply);
    envelope.id = MessageId::derived(callback, REPLY_TAG);
    app.ctx.bus.publish(&envelope).await.map_err(|e| {
        tracing::error!(%run, error = %e, "proxied answer not accepted by the broker");
        ApiError::unavailable("the answer could not be queued; retry shortly")
    })?;
    tracing::info!(%run, "proxied answer queued for delivery");
    Ok(run)
}
