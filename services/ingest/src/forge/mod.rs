//! `POST /agents/forge` (the path is `HERMES_FORGE_PATH`): a Forge wakes one of this
//! install's internal agents (docs/agents.md, "Hermes as a Forge agent"). In order, each
//! step refusing with its own clear 4xx and queueing nothing:
//!
//! 1. the route is not mounted (404) until `HERMES_FORGE_WEBHOOK_SECRETS` is set;
//! 2. the body is read within `HERMES_FORGE_MAX_BODY_BYTES` (413) in the pool of unverified
//!    bodies, and its signature verified on the raw bytes before anything parses them and
//!    before the wake takes a slot (`crate::front_door::signed`, [`verify`]);
//! 3. the secret that signed it is within `HERMES_FORGE_WAKES_PER_MINUTE` (429);
//! 4. `X-Forge-Delivery` is required, then the envelope is read ([`wake`]);
//! 5. `agent.profileKey` must name an internal agent ([`route`]: 404 unknown, 409 external);
//! 6. the wake is claimed in `forge_deliveries` by its delivery id and by what its signature
//!    covers: a Forge's retry of a delivery answers 200 `duplicate`, a captured wake replayed
//!    under another delivery id 409 `replayed`;
//! 7. the wake is published to the router with a broker confirm, and only then is the Forge
//!    answered 202; a publish that fails releases the claim and answers 503, so the Forge's
//!    retry is taken.
//!
//! Every wake is counted in `hermes_forge_wakes_total{outcome}`: `queued`, `duplicate`, or
//! the refusal's error code. Its run's model calls count against its workspace's daily
//! Forge budget at the gateway (`HERMES_FORGE_DAILY_TOKENS`, `HERMES_FORGE_DAILY_USD`).

mod route;
pub mod verify;
pub mod wake;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hermes_cache::rate_limit::Verdict;
use hermes_db::agents::Agent;
use hermes_db::forge_deliveries::{self, Claim};
use hermes_net::signing::{FORGE_DELIVERY, FORGE_EVENT};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{ForgeWake, Inbound, MessageEvent, Platform};
use hermes_types::trace::TraceParent;
use secrecy::ExposeSecret;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::webhooks::traceparent;
use crate::{AppState, body_or_error};
use verify::{Scheme, Verified};
use wake::Wake;

/// Longest `X-Forge-Delivery` taken.
const MAX_DELIVERY_ID: usize = 200;

/// `POST /agents/forge`
pub async fn wake(
    State(app): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let outcome = take(&app, &headers, body).await;
    let label = match &outcome {
        Ok(Taken::Queued { .. }) => "queued",
        Ok(Taken::Duplicate { .. }) => "duplicate",
        Err(e) => e.code.as_str(),
    };
    count(&app, label);
    match outcome {
        Ok(Taken::Queued { run, delivery_id }) => (
            StatusCode::ACCEPTED,
            Json(json!({ "ok": true, "run_id": run, "delivery_id": delivery_id })),
        )
            .into_response(),
        Ok(Taken::Duplicate { run, delivery_id }) => Json(json!({
            "ok": true, "duplicate": true, "run_id": run, "delivery_id": delivery_id,
        }))
        .into_response(),
        Err(e) => {
            tracing::info!(code = e.code.as_str(), "Forge wake refused");
            e.into_response()
        }
    }
}

fn count(app: &AppState, outcome: &str) {
    app.ctx
        .metrics
        .agents
        .forge_wakes
        .with_label_values(&[outcome])
        .inc();
}

/// A wake refused before its handler ran (`crate::front_door::signed`), counted and logged
/// as the handler's refusals are.
pub(crate) fn refused(app: &AppState, e: ApiError) -> Response {
    count(app, e.code.as_str());
    tracing::info!(code = e.code.as_str(), "Forge wake refused");
    e.into_response()
}

/// The wake's signature under the configured scheme and secrets, or the 401 to answer.
pub(crate) fn verify_signature(
    app: &AppState,
    headers: &HeaderMap,
    raw: &[u8],
) -> Result<Verified, ApiError> {
    let settings = &app.ctx.config.forge;
    let scheme = if settings.body_signature {
        Scheme::BodyOnly
    } else {
        Scheme::Timestamped
    };
    let now = chrono::Utc::now().timestamp();
    verify::verify(scheme, &settings.secrets, headers, raw, now)
        .map_err(|e| ApiError::new(StatusCode::UNAUTHORIZED, e.code(), e.message()))
}

/// One wake taken from the rate of the secret that signed it; 429 beyond. The bucket is
/// named by a digest of the secret, never the secret. Like every rate limit, Redis trouble
/// lets the wake through (logged).
async fn within_rate(app: &AppState, verified: &Verified) -> Result<(), ApiError> {
    let settings = &app.ctx.config.forge;
    let Some(secret) = settings.secrets.get(verified.secret) else {
        return Ok(());
    };
    let digest = Sha256::digest(secret.expose_secret().as_bytes());
    let bucket = format!("forge_wakes:{}", hex::encode(&digest[..12]));
    let limit = hermes_config::RateLimit {
        per_minute: settings.wakes_per_minute,
        burst: settings.wakes_per_minute,
    };
    match app.intake.limiter.take(&bucket, limit).await {
        Ok(Verdict::Limited { retry_after }) => Err(ApiError {
            retry_after: Some(retry_after.as_secs_f64().ceil().max(1.0) as u64),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ApiErrorCode::RateLimited,
                format!(
                    "this Forge secret delivered more than {} wakes a minute (HERMES_FORGE_WAKES_PER_MINUTE)",
                    settings.wakes_per_minute
                ),
            )
        }),
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::warn!(error = %e, "Forge wake rate unavailable; letting the wake through");
            Ok(())
        }
    }
}

/// What became of a wake that was not refused.
enum Taken {
    /// Published to the router as `run`.
    Queued { run: RunId, delivery_id: String },
    /// Its delivery id was taken before (as `run`): nothing was queued.
    Duplicate { run: RunId, delivery_id: String },
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> ApiError {
    tracing::warn!(error = %e, "{what}");
    ApiError::unavailable("cannot take the wake right now; retry shortly")
}

/// The steps of the module's list from 3 on (the route is mounted and the signature was
/// checked before the body got here; it is checked again for what it covers); `Err` is the
/// refusal to answer.
async fn take(
    app: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Taken, ApiError> {
    let settings = &app.ctx.config.forge;
    let raw = body_or_error(settings.max_body_bytes, body)?;
    let verified = verify_signature(app, headers, &raw)?;
    within_rate(app, &verified).await?;
    let delivery_id = delivery_id(headers)?;
    let event_header = headers.get(FORGE_EVENT).and_then(|v| v.to_str().ok());
    let wake = wake::parse(&raw, event_header)?;
    let client = app
        .ctx
        .db
        .get()
        .await
        .map_err(|e| unavailable("no database connection for a Forge wake", e))?;
    let agent = route::internal_agent(
        &client,
        wake.workspace_slug.as_deref(),
        &settings.workspace,
        &wake.profile_key,
    )
    .await?;
    let run = RunId::new();
    let claim = forge_deliveries::claim(
        &client,
        &delivery_id,
        &verified.covered,
        &agent.profile_key,
        run,
    )
    .await
    .map_err(|e| unavailable("cannot record a Forge delivery id", e))?;
    match claim {
        Claim::New => {}
        Claim::Retry(run) => {
            tracing::info!(delivery_id, "Forge wake retried: nothing queued");
            return Ok(Taken::Duplicate { run, delivery_id });
        }
        Claim::Replay => {
            tracing::warn!(
                delivery_id,
                "Forge wake refused: its signed content was taken under another delivery id"
            );
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                ApiErrorCode::Replayed,
                "this wake's signed content was already taken under another X-Forge-Delivery; a wake is taken once",
            ));
        }
        Claim::Released => {
            return Err(ApiError::unavailable(
                "this wake is being retried concurrently; retry shortly",
            ));
        }
    }
    let inbound = inbound(&agent, &delivery_id, wake);
    let envelope = Envelope::new(
        run,
        Some(traceparent(headers).unwrap_or_else(TraceParent::generate)),
        &inbound,
    );
    // No connection is held while the broker is waited on: a stalled broker must not take
    // the pool with it.
    drop(client);
    if let Err(e) = app.ctx.bus.publish(&envelope).await {
        tracing::error!(%run, error = %e, "Forge wake not accepted by the broker");
        release(app, &delivery_id, run).await;
        return Err(ApiError::unavailable(
            "the wake could not be queued; retry shortly",
        ));
    }
    tracing::info!(%run, agent = agent.profile_key, event = inbound.forge.as_ref().map(|f| f.event.as_str()), "Forge wake queued");
    Ok(Taken::Queued { run, delivery_id })
}

/// Release the claim of a wake that was not queued: the Forge's retry of this delivery
/// must be taken, not deduplicated (nor refused as a replay of itself). Without PostgreSQL the id stays taken until retention
/// removes it, and the Forge's retries are answered as duplicates (logged).
async fn release(app: &AppState, delivery_id: &str, run: RunId) {
    let released = match app.ctx.db.get().await {
        Ok(client) => forge_deliveries::release(&client, delivery_id, run)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = released {
        tracing::error!(%run, delivery_id, error = %e, "cannot release the refused wake's delivery id");
    }
}

/// `X-Forge-Delivery`: 1 to [`MAX_DELIVERY_ID`] printable ASCII characters.
fn delivery_id(headers: &HeaderMap) -> Result<String, ApiError> {
    let value = headers
        .get(FORGE_DELIVERY)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(
                ApiErrorCode::MissingDeliveryId,
                format!("the {FORGE_DELIVERY} header is required: it deduplicates retried wakes"),
            )
        })?;
    if value.len() > MAX_DELIVERY_ID || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::bad_request(
            ApiErrorCode::InvalidDeliveryId,
            format!("{FORGE_DELIVERY} must be 1 to {MAX_DELIVERY_ID} printable ASCII characters"),
        ));
    }
    Ok(value.to_string())
}

/// The wake as the router's inbound message: no user, no session; the agent, the policy
/// and the envelope travel with it.
fn inbound(agent: &Agent, delivery_id: &str, wake: Wake) -> Inbound {
    let text = format!(
        "Forge wake {} for @{} (delivery {delivery_id})",
        wake.event, agent.profile_key
    );
    let forge = ForgeWake {
        agent_id: agent.id,
        workspace_id: agent.workspace_id,
        delivery_id: delivery_id.to_string(),
        event: wake.event,
        contract_version: wake.contract_version,
    };
    Inbound {
        policy: wake.policy,
        forge: Some(forge),
        ..Inbound::of(MessageEvent {
            platform: Platform::Forge,
            sender_id: agent.profile_key.clone(),
            chat_id: delivery_id.to_string(),
            text: Some(text),
            media: Vec::new(),
            external_message_id: Some(delivery_id.to_string()),
            sender_name: None,
            received_at: chrono::Utc::now(),
            metadata: Some(wake.envelope),
        })
    }
}
