//! `POST /v1/chat/completions`: validate, hand the message to the router durably (2xx only
//! after the broker confirmed it), then either wait for the run's outcome and answer in
//! OpenAI's shape, or (`"stream": true`) stream the answer as it is produced.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hermes_runtime::http::ApiError;
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{FailureCode, Inbound, MessageEvent, Outcome, Platform, Role};
use hermes_types::trace::TraceParent;

use crate::rest::Caller;
use crate::{AppState, body_or_error, openai, stream, wait};

pub async fn completions(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match handle(&app, &caller, &headers, body).await {
        Ok(resp) => resp,
        Err(e) => {
            app.ctx
                .metrics
                .ingest_messages
                .with_label_values(&["api", e.code])
                .inc();
            e.into_response()
        }
    }
}

async fn handle(
    app: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body_or_error(app.ctx.config.max_body_bytes, body)?;
    let request = openai::parse(&body)?;
    let run = RunId::new();
    let traceparent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(TraceParent::parse)
        .map(|t| t.child())
        .unwrap_or_else(TraceParent::generate);
    let last_user_text = request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .and_then(|m| m.content.clone());
    let inbound = Inbound {
        event: MessageEvent {
            platform: Platform::Api,
            sender_id: "api".into(),
            chat_id: run.to_string(),
            text: last_user_text,
            media: Vec::new(),
            external_message_id: None,
            sender_name: None,
            received_at: chrono::Utc::now(),
            metadata: None,
        },
        conversation: request.messages,
        requested_model: request.model.clone(),
        callback_url: None,
        // A key's calls are metered against its budgets (docs/models-and-budgets.md).
        api_key_id: caller.key_id(),
        params: request.params,
        stream: request.stream,
    };
    let envelope = Envelope::new(run, Some(traceparent.clone()), &inbound);
    // Register before publishing so a fast answer cannot slip past us.
    let guard = app.waiters.register(run);
    if let Err(e) = app.ctx.bus.publish(&envelope).await {
        tracing::error!(%run, error = %e, "inbound message not accepted by the broker");
        return Err(ApiError::unavailable(
            "the message could not be queued; retry shortly",
        ));
    }
    app.ctx
        .metrics
        .ingest_messages
        .with_label_values(&["api", "accepted"])
        .inc();
    tracing::info!(%run, trace_id = traceparent.trace_id(), "chat completion accepted");
    let model_name = request
        .model
        .unwrap_or_else(|| app.ctx.config.api.model_name.clone());
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
    let outcome = wait::outcome(
        &app.ctx,
        &app.events,
        guard,
        run,
        app.ctx.config.run_timeout,
    )
    .await;
    let resp = match outcome {
        Some(Outcome::Answered {
            text,
            usage,
            finish_reason,
            ..
        }) => Json(openai::completion(
            run,
            &model_name,
            &text,
            finish_reason.as_str(),
            usage,
        ))
        .into_response(),
        Some(Outcome::Failed { code, message }) => {
            let status = match code {
                FailureCode::ProvidersUnavailable => StatusCode::BAD_GATEWAY,
                FailureCode::ProviderRejected => StatusCode::BAD_GATEWAY,
                FailureCode::Invalid => StatusCode::UNPROCESSABLE_ENTITY,
                FailureCode::BudgetExceeded => StatusCode::TOO_MANY_REQUESTS,
                FailureCode::BudgetUnavailable
                | FailureCode::SpendingPaused
                | FailureCode::Capacity
                | FailureCode::WorkspaceSecretsUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            };
            ApiError::new(status, code.as_str(), message).into_response()
        }
        None => ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "run_timeout",
            format!(
                "no answer within {}s; the run {run} goes on",
                app.ctx.config.run_timeout.as_secs()
            ),
        )
        .into_response(),
    };
    Ok(with_run_id(resp, run))
}

/// The header naming the run an accepted request started.
pub(crate) const RUN_ID_HEADER: &str = "x-hermes-run-id";

/// Name the run on the answer, so the caller can look it up (and report it) later.
fn with_run_id(mut resp: Response, run: RunId) -> Response {
    if let Ok(v) = HeaderValue::from_str(&run.to_string()) {
        resp.headers_mut().insert(RUN_ID_HEADER, v);
    }
    resp
}
