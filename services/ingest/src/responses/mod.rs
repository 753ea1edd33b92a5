//! The OpenAI Responses API (docs/api.md, "Responses"): `POST /v1/responses`, `GET` and
//! `DELETE /v1/responses/{id}`, durable in PostgreSQL so that any ingest replica serves any
//! request.
//!
//! A create rebuilds the conversation it continues (`previous_response_id`, or the latest
//! response of a named `conversation` of the calling key) from the stored inputs and the
//! runs' answers and tool rounds, records the response before its message is published (so
//! a fast answer never lacks its row), then answers like chat completions do: waiting for
//! the run's outcome, or streaming it ([`events`]).

mod events;
mod input;
mod object;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hermes_db::responses::{self, NewResponse};
use hermes_db::runs::{self, RunStatus};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::ids::{ResponseId, RunId, SessionId};
use hermes_types::model::{ApiSession, ChatMessage, Role};
use serde_json::json;

use crate::chat::{self, Turns};
use crate::rest::Caller;
use crate::{AppState, api_body, stream};
use object::{Body, Head};

/// `POST /v1/responses`
pub async fn create(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let result = handle(&app, &caller, &headers, body).await;
    chat::counted(&app, result)
}

fn not_found(what: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ApiErrorCode::NotFound,
        format!("no stored response {what}"),
    )
}

fn unavailable() -> ApiError {
    ApiError::unavailable("cannot reach the response store right now; retry shortly")
}

/// The response chained to: the one named, or the latest of the named conversation.
async fn chained_to(
    client: &hermes_db::Client,
    caller: &Caller,
    previous: Option<&str>,
    conversation: Option<&str>,
) -> Result<Option<ResponseId>, ApiError> {
    if let Some(previous) = previous {
        let refused = || {
            ApiError::new(
                StatusCode::NOT_FOUND,
                ApiErrorCode::PreviousResponseNotFound,
                format!("previous_response_id {previous:?}: no stored response has this id"),
            )
        };
        let id = ResponseId::parse_wire(previous).ok_or_else(refused)?;
        return match responses::get(client, id, caller.key_id()).await {
            Ok(Some(_)) => Ok(Some(id)),
            Ok(None) => Err(refused()),
            Err(_) => Err(unavailable()),
        };
    }
    match conversation {
        Some(name) => responses::latest_in_conversation(client, caller.key_id(), name)
            .await
            .map_err(|_| unavailable()),
        None => Ok(None),
    }
}

/// What a run continuing a stored response starts from.
pub(crate) struct Earlier {
    /// The conversation of the response and the ones it chains to.
    pub history: Vec<ChatMessage>,
    /// The session that conversation lives in, which the run carries on.
    pub session: Option<SessionId>,
}

/// The conversation of the stored response `previous` and the ones it chains to, for a run
/// that continues it (`POST /v1/runs` with `previous_response_id`): 404
/// `previous_response_not_found` as for a chained response.
pub(crate) async fn conversation_before(
    app: &AppState,
    caller: &Caller,
    previous: &str,
) -> Result<Earlier, ApiError> {
    let client = app.ctx.db.get().await.map_err(|_| unavailable())?;
    let Some(id) = chained_to(&client, caller, Some(previous), None).await? else {
        return Ok(Earlier {
            history: Vec::new(),
            session: None,
        });
    };
    let chain = responses::chain(&client, id)
        .await
        .map_err(|_| unavailable())?;
    Ok(Earlier {
        history: input::history(&chain),
        session: responses::session_of(&chain),
    })
}

async fn handle(
    app: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = api_body(app.ctx.config.ingest.max_body_bytes, body)?;
    let request = input::parse(&body)?;
    let client = app.ctx.db.get().await.map_err(|_| unavailable())?;
    let previous = chained_to(
        &client,
        caller,
        request.previous.as_deref(),
        request.conversation.as_deref(),
    )
    .await?;
    let mut messages: Vec<ChatMessage> = request
        .instructions
        .iter()
        .map(|i| ChatMessage::text(Role::System, i.clone()))
        .collect();
    // A stored response is one turn of a conversation that can go on: its session is the
    // chain's (docs/api.md, "Responses"). One that is not stored cannot be continued.
    let mut api_session = request.store.then_some(ApiSession::Open);
    if let Some(previous) = previous {
        let chain = responses::chain(&client, previous)
            .await
            .map_err(|_| unavailable())?;
        messages.extend(input::history(&chain));
        api_session = Some(ApiSession::continuing(responses::session_of(&chain)));
    }
    messages.extend(request.turns);
    if !input::has_user_text(&messages) {
        return Err(ApiError::bad_request(
            ApiErrorCode::InvalidRequest,
            "the conversation needs a user message with text",
        ));
    }
    let run = RunId::new();
    let head = Head {
        id: ResponseId::new(),
        run,
        created_at: chrono::Utc::now().timestamp(),
        model: request
            .model
            .clone()
            .unwrap_or_else(|| app.ctx.config.ingest.api.model_name.clone()),
        instructions: request.instructions.clone(),
        previous,
        params: request.params.clone(),
        store: request.store,
    };
    // Recorded before the message is published: a fast answer never lacks its row.
    responses::insert(
        &client,
        &NewResponse {
            id: head.id,
            run_id: run,
            api_key_id: caller.key_id(),
            conversation: request.conversation.as_deref(),
            previous,
            input: &request.input,
            instructions: request.instructions.as_deref(),
            model: request.model.as_deref(),
            params: &request.params,
            store: request.store,
        },
    )
    .await
    .map_err(|e| {
        tracing::warn!(error = %e, "response not recorded");
        unavailable()
    })?;
    drop(client);
    let published = chat::publish(
        app,
        caller,
        headers,
        run,
        Turns {
            messages,
            model: request.model,
            params: request.params,
            stream: request.stream,
            api_session,
        },
    )
    .await;
    let guard = match published {
        Ok(guard) => guard,
        Err(e) => {
            // Nothing was accepted: no response may claim a run that will never exist.
            forget(app, head.id).await;
            return Err(e);
        }
    };
    tracing::info!(%run, response = %head.id.wire(), "response accepted");
    if request.stream {
        let resp = stream::follow(&app.ctx, &app.events, guard, run, events::Events::new(head));
        return Ok(chat::with_run_id(resp, run));
    }
    let pending = format!(
        "the response {} (GET /v1/responses/{} later)",
        head.id.wire(),
        head.id.wire()
    );
    let resp = chat::answer_when_done(app, guard, run, &pending, |a| {
        object::response(
            &head,
            &Body::completed(run, &a.transcript, &a.text, a.usage),
        )
    })
    .await;
    Ok(chat::with_run_id(resp, run))
}

/// Remove the row of a response whose message was never accepted (best effort: a row left
/// behind reads as in progress until retention removes it).
async fn forget(app: &AppState, id: ResponseId) {
    let removed = async {
        let client = app.ctx.db.get().await?;
        responses::discard(&client, id).await
    }
    .await;
    if let Err(e) = removed {
        tracing::warn!(response = %id.wire(), error = %e, "unaccepted response left behind");
    }
}

/// `GET /v1/responses/{id}`: a stored response of the calling key (the operator key reads
/// every one), as it stands now.
pub async fn get(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    retrieve(&app, &caller, &id)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn retrieve(app: &AppState, caller: &Caller, id: &str) -> Result<Response, ApiError> {
    let response_id = ResponseId::parse_wire(id).ok_or_else(|| not_found(id))?;
    let client = app.ctx.db.get().await.map_err(|_| unavailable())?;
    let stored = responses::get(&client, response_id, caller.key_id())
        .await
        .map_err(|_| unavailable())?
        .ok_or_else(|| not_found(id))?;
    let run = runs::get(&client, stored.run_id)
        .await
        .map_err(|_| unavailable())?;
    let body = match run {
        Some(r) if r.status == RunStatus::Completed => Body::completed(
            stored.run_id,
            &r.transcript,
            r.output_text.as_deref().unwrap_or_default(),
            r.usage,
        ),
        Some(r) if matches!(r.status, RunStatus::Failed | RunStatus::Cancelled) => Body::failed(
            r.error_code.as_deref().unwrap_or("failed"),
            r.output_text.as_deref().unwrap_or_default(),
        ),
        // Not yet routed, or on its way.
        _ => Body::in_progress(),
    };
    let head = Head {
        id: stored.id,
        run: stored.run_id,
        created_at: stored.created_at.timestamp(),
        model: stored
            .model
            .unwrap_or_else(|| app.ctx.config.ingest.api.model_name.clone()),
        instructions: stored.instructions,
        previous: stored.previous,
        params: stored.params,
        store: true,
    };
    Ok(Json(object::response(&head, &body)).into_response())
}

/// `DELETE /v1/responses/{id}`: gone for good; it can no longer be read nor chained to.
pub async fn delete(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
) -> Response {
    let result = async {
        let response_id = ResponseId::parse_wire(&id).ok_or_else(|| not_found(&id))?;
        let client = app.ctx.db.get().await.map_err(|_| unavailable())?;
        if !responses::delete(&client, response_id, caller.key_id())
            .await
            .map_err(|_| unavailable())?
        {
            return Err(not_found(&id));
        }
        Ok(Json(json!({ "id": id, "object": "response", "deleted": true })).into_response())
    }
    .await;
    result.unwrap_or_else(IntoResponse::into_response)
}
