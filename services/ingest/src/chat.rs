//! `POST /v1/chat/completions`: validate, hand the message to the router durably (2xx only
//! after the broker confirmed it), then either wait for the run's outcome and answer in
//! OpenAI's shape, or (`"stream": true`) stream the answer as it is produced.
//!
//! Publishing an API caller's turns and waiting for their answer are shared with the
//! Responses API (`crate::responses`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hermes_cache::run_events::{WaiterGuard, Wake};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{
    ApiSession, CallParams, ChatMessage, FailureCode, FinishReason, Inbound, MessageEvent, Outcome,
    Platform, Role, Usage,
};
use hermes_types::trace::TraceParent;

use crate::rest::Caller;
use crate::{AppState, api_body, openai, stream, wait};

pub async fn completions(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let result = handle(&app, &caller, &headers, body).await;
    counted(&app, result)
}

/// The answer to an API message, a refusal counted in the ingest metrics by its code.
pub(crate) fn counted(app: &AppState, result: Result<Response, ApiError>) -> Response {
    result.unwrap_or_else(|e| {
        app.ctx
            .metrics
            .http
            .ingest_messages
            .with_label_values(&["api", e.code.as_str()])
            .inc();
        e.into_response()
    })
}

async fn handle(
    app: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = api_body(app.ctx.config.ingest.max_body_bytes, body)?;
    let request = openai::parse(&body)?;
    // The caller's Idempotency-Key, else its request id, names the run, so that a retry after
    // a 503 cannot make a second one (docs/api.md, retrying safely). The idempotency
    // middleware checked the key's shape already.
    let request_id = crate::request_id::of(headers)?;
    let named = headers
        .get(crate::idempotency::HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(request_id);
    let run = match named {
        Some(id) => {
            crate::request_id::run_for(caller, crate::request_id::Surface::Chat, &id, &body)
        }
        None => RunId::new(),
    };
    let guard = publish(
        app,
        caller,
        headers,
        run,
        Turns {
            messages: request.messages,
            model: request.model.clone(),
            params: request.params,
            stream: request.stream,
            api_session: None,
        },
    )
    .await?;
    let model_name = request
        .model
        .unwrap_or_else(|| app.ctx.config.ingest.api.model_name.clone());
    if request.stream {
        let resp = stream::respond(
            &app.ctx,
            &app.events,
            guard,
            run,
            model_name,
            request.include_usage,
        );
        return Ok(with_run_id(resp, run));
    }
    let resp = answer_when_done(app, guard, run, &format!("the run {run}"), |a| {
        let usage = openai::usage(a.usage, a.tools_used.len());
        openai::completion(run, &model_name, &a.text, a.finish_reason.as_str(), usage)
    })
    .await;
    Ok(with_run_id(resp, run))
}

/// What a run answered, for [`answer_when_done`].
pub(crate) struct Answered {
    pub text: String,
    pub usage: Usage,
    pub finish_reason: FinishReason,
    /// Each tool call the run made, by tool name.
    pub tools_used: Vec<String>,
    pub transcript: Vec<ChatMessage>,
}

/// Wait for run `run`'s outcome and answer with what `render` makes of its answer; a failure
/// is answered as an error by its code, and a wait that runs out says `pending` goes on.
pub(crate) async fn answer_when_done(
    app: &AppState,
    guard: WaiterGuard,
    run: RunId,
    pending: &str,
    render: impl FnOnce(Answered) -> serde_json::Value,
) -> Response {
    let outcome = wait::outcome(
        &app.ctx,
        &app.events,
        guard,
        run,
        app.ctx.config.ingest.run_timeout,
    )
    .await;
    match outcome {
        Some(Outcome::Answered {
            text,
            usage,
            finish_reason,
            tools_used,
            transcript,
            ..
        }) => Json(render(Answered {
            text,
            usage,
            finish_reason,
            tools_used,
            transcript,
        }))
        .into_response(),
        Some(Outcome::Failed { code, message }) => failure(code, message).into_response(),
        None => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            ApiErrorCode::RunTimeout,
            format!(
                "no answer within {}s; {pending} goes on",
                app.ctx.config.ingest.run_timeout.as_secs()
            ),
        )
        .into_response(),
    }
}

/// What an API caller asks the fleet to answer.
pub(crate) struct Turns {
    /// The whole conversation, in neutral form.
    pub messages: Vec<ChatMessage>,
    /// The model name the caller asked for: echoed back, and when written
    /// `provider:model` the configured model the run tries first.
    pub model: Option<String>,
    pub params: CallParams,
    pub stream: bool,
    /// The session of turns that can be continued (see [`Inbound::api_session`]).
    pub api_session: Option<ApiSession>,
}

/// Hand an API caller's turns to the router as run `run`, durably (the broker confirmed
/// it), and return the waiter registered for its outcome before it was published, so a
/// fast answer cannot slip past it.
pub(crate) async fn publish(
    app: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    run: RunId,
    turns: Turns,
) -> Result<WaiterGuard, ApiError> {
    crate::images::within_count(&turns.messages, app.ctx.config.ingest.api.image_max_count)?;
    let traceparent = crate::webhooks::traceparent(headers).unwrap_or_else(TraceParent::generate);
    let last_user_text = turns
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .and_then(|m| m.content.clone());
    let chosen_model = match &turns.model {
        Some(name) => crate::model_choice::choose(&app.ctx.config.models, name)?,
        None => None,
    };
    let inbound = Inbound {
        conversation: turns.messages,
        requested_model: turns.model,
        chosen_model,
        // A key's calls are metered against its budgets (docs/models-and-budgets.md).
        api_key_id: caller.key_id(),
        params: turns.params,
        stream: turns.stream,
        api_session: turns.api_session,
        ..Inbound::of(api_event("api", run, last_user_text, None))
    };
    let guard = hand_over(app, run, &traceparent, &inbound)
        .await
        .ok_or_else(|| ApiError::unavailable("the message could not be queued; retry shortly"))?;
    tracing::info!(%run, trace_id = traceparent.trace_id(), "api message accepted");
    Ok(guard)
}

/// The message of an API run `run` from `sender` (`api`, `a2a`): its answer goes to the
/// run's own chat, read by whoever follows the run.
pub(crate) fn api_event(
    sender: &str,
    run: RunId,
    text: Option<String>,
    metadata: Option<serde_json::Value>,
) -> MessageEvent {
    MessageEvent {
        platform: Platform::Api,
        sender_id: sender.into(),
        chat_id: run.to_string(),
        text,
        media: Vec::new(),
        external_message_id: None,
        sender_name: None,
        received_at: chrono::Utc::now(),
        metadata,
    }
}

/// Hand an API caller's `inbound` to the router as run `run`, durably (the broker confirmed
/// it), counted as accepted, and return the waiter for its outcome, registered before the
/// message was published so a fast answer cannot slip past it; `None` (logged) when the
/// broker did not take it.
pub(crate) async fn hand_over(
    app: &AppState,
    run: RunId,
    traceparent: &TraceParent,
    inbound: &Inbound,
) -> Option<WaiterGuard> {
    let envelope = Envelope::new(run, Some(traceparent.clone()), inbound);
    // A caller that waits for the answer whole is woken by the run's last event only.
    let wake = if inbound.stream {
        Wake::Every
    } else {
        Wake::Last
    };
    let guard = app.waiters.register(run, wake);
    if let Err(e) = app.ctx.bus.publish(&envelope).await {
        tracing::error!(%run, error = %e, "inbound message not accepted by the broker");
        return None;
    }
    app.ctx
        .metrics
        .http
        .ingest_messages
        .with_label_values(&["api", "accepted"])
        .inc();
    Some(guard)
}

/// The HTTP error of a failed run, by its code.
pub(crate) fn failure(code: FailureCode, message: String) -> ApiError {
    let status = match code {
        FailureCode::ProvidersUnavailable => StatusCode::BAD_GATEWAY,
        FailureCode::ProviderRejected => StatusCode::BAD_GATEWAY,
        FailureCode::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
        FailureCode::BudgetExceeded => StatusCode::TOO_MANY_REQUESTS,
        FailureCode::BudgetUnavailable
        | FailureCode::SpendingPaused
        | FailureCode::Capacity
        | FailureCode::WorkspaceSecretsUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        // Stopped on request (`POST /v1/runs/{id}/stop`): no answer will come.
        FailureCode::Cancelled => StatusCode::CONFLICT,
        // The external agent never answered, or gave up: the upstream of this run failed.
        FailureCode::Expired => StatusCode::GATEWAY_TIMEOUT,
        FailureCode::AgentFailed | FailureCode::ForgeLoopFailed => StatusCode::BAD_GATEWAY,
    };
    ApiError::new(status, ApiErrorCode::RunFailed(code), message)
}

/// The header naming the run an accepted request started.
pub(crate) const RUN_ID_HEADER: &str = "x-hermes-run-id";

/// Name the run on the answer, so the caller can look it up (and report it) later.
pub(crate) fn with_run_id(mut resp: Response, run: RunId) -> Response {
    if let Ok(v) = HeaderValue::from_str(&run.to_string()) {
        resp.headers_mut().insert(RUN_ID_HEADER, v);
    }
    resp
}
