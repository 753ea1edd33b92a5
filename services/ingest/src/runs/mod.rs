//! The Runs API (docs/api.md, runs): `POST /v1/runs` starts a run and answers at once;
//! `GET /v1/runs/{id}` shows it (runs of the REST channel too); `GET /v1/runs/{id}/events`
//! follows it as server-sent events ([`events`]); `POST /v1/runs/{id}/stop` asks it to stop.
//!
//! Nothing here lives in one process: the run's truth is its row in PostgreSQL, its events
//! are a Redis stream any replica reads, and a stop request is recorded on the row, where
//! the llm and tools stages look for it before their next call. Until the router has
//! written the row, the run is known by the first event of its stream, which ingest writes
//! before handing the run to the broker and which names the key that made it.

mod events;
pub(crate) mod request;

pub use events::events;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hermes_cache::run_events::RunEvent;
use hermes_db::platform_sends;
use hermes_db::runs::{self, RunRow, RunStatus};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{ApiSession, Inbound, Platform};
use hermes_types::trace::TraceParent;
use serde_json::{Value, json};

use crate::rest::Caller;
use crate::{AppState, api_body};

/// A run as its caller may see it.
pub(crate) enum Found {
    /// Routed: its row.
    Row(Box<RunRow>),
    /// Accepted by ingest, not yet routed: known by its stream's first event.
    Queued { session_id: Option<String> },
}

/// The status a caller is shown for a stored status: `queued`, `running`, `completed`,
/// `awaiting_approval`, `failed` or `cancelled`.
pub(crate) fn shown_status(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Routed => "queued",
        RunStatus::Running | RunStatus::AwaitingTools => "running",
        // A tool call waits for an operator (docs/operator-mcp.md, approvals).
        RunStatus::AwaitingApproval => "awaiting_approval",
        RunStatus::Completed => "completed",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
        RunStatus::Expired => "expired",
    }
}

fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, ApiErrorCode::NotFound, "no such run")
}

/// The run `id` if `caller` may see it: a key sees only the runs it made, the operator
/// every run. Another key's run is "no such run", as an unknown one.
pub(crate) async fn find(
    app: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<(RunId, Found), ApiError> {
    let run: RunId = id.parse().map_err(|_| not_found())?;
    let row = async {
        let client = app.ctx.db.get().await?;
        runs::get(&client, run).await
    }
    .await
    .map_err(|_| ApiError::unavailable("cannot read the run right now"))?;
    let mine = |owner: Option<hermes_types::ids::ApiKeyId>| match caller {
        Caller::Operator => true,
        Caller::Key(k) => owner == Some(k.id),
    };
    if let Some(row) = row {
        return if mine(row.api_key_id) {
            Ok((run, Found::Row(Box::new(row))))
        } else {
            Err(not_found())
        };
    }
    // Not routed yet (or never accepted): the stream's first event tells.
    match app.events.first(run).await {
        Ok(Some((
            _,
            RunEvent::Queued {
                api_key,
                session_id,
            },
        ))) if mine(api_key) => Ok((run, Found::Queued { session_id })),
        _ => Err(not_found()),
    }
}

/// `POST /v1/runs`
pub async fn create(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let result = start(&app, &caller, &headers, body).await;
    crate::chat::counted(&app, result)
}

async fn start(
    app: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = api_body(app.ctx.config.ingest.max_body_bytes, body)?;
    let request = request::parse(&body)?;
    let run = RunId::new();
    let traceparent = crate::webhooks::traceparent(headers).unwrap_or_else(TraceParent::generate);
    // The stored responses a run continues: their conversation, tool rounds included, goes
    // in before the caller's own history (docs/api.md, runs).
    let earlier = match request.previous_response_id.as_deref() {
        Some(previous) => Some(crate::responses::conversation_before(app, caller, previous).await?),
        None => None,
    };
    // A run continuing a stored response carries on its chain's session.
    let api_session = earlier.as_ref().map(|e| ApiSession::continuing(e.session));
    let conversation =
        request::conversation(&request, earlier.map(|e| e.history).unwrap_or_default());
    crate::images::within_count(&conversation, app.ctx.config.ingest.api.image_max_count)?;
    let inbound = Inbound {
        conversation,
        api_key_id: caller.key_id(),
        // Runs are followed through their events: the model's text is streamed onto them.
        stream: true,
        policy: request.policy.clone(),
        api_session,
        ..Inbound::of(crate::chat::api_event(
            "api",
            run,
            Some(request.input.clone()),
            Some(request.metadata.clone()),
        ))
    };
    // The first event, before the broker has the run: the run is visible to its key from
    // the moment it is accepted. Redis away only delays that until the router's row.
    let queued = RunEvent::Queued {
        api_key: caller.key_id(),
        session_id: request.session_id.clone(),
    };
    if let Err(e) = app.events.append(run, Platform::Api, &queued).await {
        tracing::warn!(%run, error = %e, "cannot append the queued event; the run shows once routed");
    }
    let envelope = Envelope::new(run, Some(traceparent.clone()), &inbound);
    if let Err(e) = app.ctx.bus.publish(&envelope).await {
        tracing::error!(%run, error = %e, "run not accepted by the broker");
        // No run exists: its stream must not make it look queued.
        let _ = app.events.forget(run).await;
        return Err(ApiError::unavailable(
            "the run could not be queued; retry shortly",
        ));
    }
    app.ctx
        .metrics
        .http
        .ingest_messages
        .with_label_values(&["api", "accepted"])
        .inc();
    tracing::info!(%run, trace_id = traceparent.trace_id(), mode = request.policy.engagement_mode.as_str(), "run accepted");
    let mut resp = (
        StatusCode::ACCEPTED,
        Json(json!({ "run_id": run, "status": "started" })),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&run.to_string()) {
        resp.headers_mut().insert("x-hermes-run-id", v);
    }
    Ok(resp)
}

/// `GET /v1/runs`: there is no listing. Answered 405 (which a runtime probe reads as "the
/// runs route exists") rather than 404.
pub async fn list() -> Response {
    let mut resp = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ApiErrorCode::MethodNotAllowed,
        "runs are not listed; POST /v1/runs starts one and GET /v1/runs/{id} shows it",
    )
    .into_response();
    resp.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    resp
}

/// `GET /v1/runs/{id}`
pub async fn get(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    match find(&app, &caller, &id).await {
        Ok((run, Found::Queued { session_id })) => Json(json!({
            "object": "hermes.run",
            "run_id": run,
            "status": "queued",
            "session_id": session_id,
            "model": null,
            "output": null,
            "error": null,
        }))
        .into_response(),
        Ok((run, Found::Row(row))) => {
            let mut view = shown(&row, &caller);
            // What the user's phone reported about each message the answer became
            // (docs/channels.md, statuses); chat runs only.
            if row.platform.is_some_and(|p| p.is_chat()) {
                let sends = async {
                    let client = app.ctx.db.get().await?;
                    platform_sends::of_run(&client, run).await
                }
                .await;
                match sends {
                    Ok(sends) => view["sends"] = json!(sends),
                    Err(e) => {
                        return ApiError::unavailable(format!(
                            "cannot read the run's sends right now: {e}"
                        ))
                        .into_response();
                    }
                }
            }
            Json(view).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// A stored run as its caller sees it.
fn shown(row: &RunRow, caller: &Caller) -> Value {
    let (output, error) = match row.status {
        RunStatus::Completed => (row.output_text.clone(), Value::Null),
        RunStatus::Failed | RunStatus::Cancelled | RunStatus::Expired => {
            let mut error = json!({ "code": row.error_code, "message": row.output_text });
            // What went wrong in detail (scrubbed) is for the operator, never the key.
            if let (Caller::Operator, Some(detail)) = (caller, &row.error_detail) {
                error["detail"] = json!(detail);
            }
            (None, error)
        }
        _ => (None, Value::Null),
    };
    let session_id = row
        .metadata
        .as_ref()
        .and_then(|m| m.get("session_id"))
        .cloned()
        .unwrap_or(Value::Null);
    json!({
        "object": "hermes.run",
        "run_id": row.id,
        "status": shown_status(row.status),
        "platform": row.platform.map(|p| p.as_str()),
        "session_id": session_id,
        "model": row.model,
        "output": output,
        "error": error,
        "tools_used": row.tools_used,
        "usage": {
            "input_tokens": row.usage.input_tokens,
            "output_tokens": row.usage.output_tokens,
            "total_tokens": row.usage.total(),
            "cost_usd": row.usage.cost_usd(),
            "tool_calls_made": row.tools_used.len(),
        },
        "stop_requested_at": row.stop_requested_at,
        "created_at": row.created_at,
        "finished_at": row.finished_at,
    })
}

fn finished(status: RunStatus) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        ApiErrorCode::RunFinished,
        format!("the run already ended: {}", shown_status(status)),
    )
}

/// `POST /v1/runs/{id}/stop`
pub async fn stop(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    match ask_to_stop(&app, &caller, &id).await {
        Ok(run) => Json(json!({ "run_id": run, "status": "stopping" })).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Record a stop of the run `id` as `caller` may (the A2A cancel is this too).
pub(crate) async fn ask_to_stop(
    app: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<RunId, ApiError> {
    let (run, found) = find(app, caller, id).await?;
    let row = match found {
        Found::Row(row) => row,
        // The stop is recorded on the row, which the router writes in a moment.
        Found::Queued { .. } => {
            return Err(ApiError {
                retry_after: Some(1),
                ..ApiError::new(
                    StatusCode::CONFLICT,
                    ApiErrorCode::RunQueued,
                    "the run is not routed yet; retry in a moment",
                )
            });
        }
    };
    if row.status.is_final() {
        return Err(finished(row.status));
    }
    let asked = async {
        let client = app.ctx.db.get().await?;
        runs::request_stop(&client, run).await
    }
    .await
    .map_err(|_| ApiError::unavailable("cannot record the stop right now"))?;
    if !asked {
        // It ended between the read and the request: say how.
        let status = async {
            let client = app.ctx.db.get().await.ok()?;
            runs::get(&client, run).await.ok()?.map(|r| r.status)
        }
        .await
        .unwrap_or(RunStatus::Completed);
        return Err(finished(status));
    }
    if let Err(e) = app
        .events
        // A platform this build cannot name is written to, as a caller's would be.
        .append(
            run,
            row.platform.unwrap_or(Platform::Api),
            &RunEvent::StopRequested,
        )
        .await
    {
        tracing::warn!(%run, error = %e, "cannot append the stop event; the stop itself is recorded");
    }
    tracing::info!(%run, "stop requested");
    Ok(run)
}
