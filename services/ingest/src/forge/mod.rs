//! `POST /agents/forge` (the path is `HERMES_FORGE_PATH`): a Forge wakes one of this
//! install's internal agents (docs/agents.md, "Hermes as a Forge agent"). In order, each
//! step refusing with its own clear 4xx and queueing nothing:
//!
//! 1. the route is off (404) until `HERMES_FORGE_WEBHOOK_SECRETS` is set;
//! 2. the body is read within `HERMES_FORGE_MAX_BODY_BYTES` (413);
//! 3. its signature is verified on the raw bytes, before anything parses them ([`verify`]);
//! 4. `X-Forge-Delivery` is required (the dedupe key), then the envelope is read ([`wake`]);
//! 5. `agent.profileKey` must name an internal agent ([`route`]: 404 unknown, 409 external);
//! 6. the delivery id is claimed in `forge_deliveries`: a replay answers 200 `duplicate`;
//! 7. the wake is published to the router with a broker confirm, and only then is the Forge
//!    answered 202; a publish that fails releases the claim and answers 503, so the Forge's
//!    retry is taken.
//!
//! Every wake is counted in `hermes_forge_wakes_total{outcome}`: `queued`, `duplicate`, or
//! the refusal's error code.

mod route;
pub mod verify;
pub mod wake;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hermes_db::agents::Agent;
use hermes_db::forge_deliveries;
use hermes_net::signing::{FORGE_DELIVERY, FORGE_EVENT};
use hermes_runtime::http::ApiError;
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{ForgeWake, Inbound, MessageEvent, Platform};
use hermes_types::trace::TraceParent;
use serde_json::json;

use crate::webhooks::traceparent;
use crate::{AppState, body_or_error};
use verify::Scheme;
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
        Err(e) => e.code,
    };
    app.ctx
        .metrics
        .agents
        .forge_wakes
        .with_label_values(&[label])
        .inc();
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
            tracing::info!(code = e.code, "Forge wake refused");
            e.into_response()
        }
    }
}

/// What became of a wake that was not refused.
enum Taken {
    /// Published to the router as `run`.
    Queued { run: RunId, delivery_id: String },
    /// Its delivery id was taken before (as `run`, when still known): nothing was queued.
    Duplicate {
        run: Option<RunId>,
        delivery_id: String,
    },
}

/// The steps of the module's list, in order; `Err` is the refusal to answer.
async fn take(
    app: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Taken, ApiError> {
    let settings = &app.ctx.config.forge;
    if !settings.enabled() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_configured",
            "Forge wakes are not configured (set HERMES_FORGE_WEBHOOK_SECRETS)",
        ));
    }
    let raw = body_or_error(settings.max_body_bytes, body)?;
    let scheme = if settings.body_signature {
        Scheme::BodyOnly
    } else {
        Scheme::Timestamped
    };
    let now = chrono::Utc::now().timestamp();
    verify::verify(scheme, &settings.secrets, headers, &raw, now)
        .map_err(|e| ApiError::new(StatusCode::UNAUTHORIZED, e.code(), e.message()))?;
    let delivery_id = delivery_id(headers)?;
    let event_header = headers.get(FORGE_EVENT).and_then(|v| v.to_str().ok());
    let wake = wake::parse(&raw, event_header)?;
    let client = app.ctx.db.get().await.map_err(|e| {
        tracing::warn!(error = %e, "no database connection for a Forge wake");
        ApiError::unavailable("cannot take the wake right now; retry shortly")
    })?;
    let agent = route::internal_agent(
        &client,
        wake.workspace_slug.as_deref(),
        &settings.workspace,
        &wake.profile_key,
    )
    .await?;
    let run = RunId::new();
    let claimed = forge_deliveries::claim(&client, &delivery_id, &agent.profile_key, run)
        .await
        .map_err(|e| {
            tracing::warn!(error = %e, "cannot record a Forge delivery id");
            ApiError::unavailable("cannot take the wake right now; retry shortly")
        })?;
    if !claimed {
        let run = forge_deliveries::run_of(&client, &delivery_id)
            .await
            .ok()
            .flatten();
        tracing::info!(delivery_id, "Forge wake replayed: nothing queued");
        return Ok(Taken::Duplicate { run, delivery_id });
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
/// must be taken, not deduplicated. Without PostgreSQL the id stays taken until retention
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
                "missing_delivery_id",
                format!("the {FORGE_DELIVERY} header is required: it deduplicates retried wakes"),
            )
        })?;
    if value.len() > MAX_DELIVERY_ID || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ApiError::bad_request(
            "invalid_delivery_id",
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
