//! A2A per workspace (docs/a2a.md): `POST /workspaces/{id}/a2a` speaks the Agent2Agent
//! protocol's JSON-RPC binding in both versions in use, 0.3 (`message/send`,
//! `message/stream`, `tasks/get`, `tasks/cancel`) and 1.0 (`SendMessage`,
//! `SendStreamingMessage`, `GetTask`, `CancelTask`), and `GET
//! /workspaces/{id}/a2a/.well-known/agent-card.json` serves the workspace's agent card,
//! which declares both. Callers use an API key with the `a2a` scope (or the operator key).
//!
//! A task is a run of the Runs API's machinery: its id is the run id, it is durable in the
//! run's row, answered by whichever replica closes it, and cancelled by the run's stop. A
//! message's `contextId` is a conversation of the workspace: a new message of a context is
//! answered with the context's earlier messages and answers as its history.
//!
//! - [`rpc`]: the envelope, the method names of both versions, the error codes;
//! - [`message`]: the params of each method, in either version, bounded;
//! - [`task`]: run to task (state, artifact, history), in either version's shapes;
//! - [`methods`]: what each method does with the runs;
//! - [`stream`]: the streaming methods' server-sent events;
//! - [`card`]: the agent card.

mod card;
mod message;
mod methods;
mod rpc;
mod stream;
mod task;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hermes_db::workspace_api::{self, Profile};
use hermes_db::workspaces::Workspace;
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::ids::WorkspaceId;

use crate::rest::Caller;
use crate::{AppState, api_body};
use rpc::{Code, Op, RpcError, Version};

/// Largest JSON-RPC body read (the API's own limit applies when it is lower): a message of
/// [`message::MAX_PARTS`] parts of at most [`message::MAX_TEXT_BYTES`] together fits.
const MAX_BODY_BYTES: usize = 256 * 1024;

/// The workspace `id` names, with its profile; `404` when there is none.
async fn workspace(app: &AppState, id: &str) -> Result<(Workspace, Profile), ApiError> {
    let not_found = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ApiErrorCode::NotFound,
            "no such workspace",
        )
    };
    let id: WorkspaceId = id.parse().map_err(|_| not_found())?;
    let client = app
        .ctx
        .db
        .get()
        .await
        .map_err(|_| ApiError::unavailable("cannot reach the workspace store right now"))?;
    workspace_api::by_id(&client, id)
        .await
        .map_err(|_| ApiError::unavailable("cannot reach the workspace store right now"))?
        .ok_or_else(not_found)
}

/// `GET /workspaces/{id}/a2a/.well-known/agent-card.json`
pub async fn agent_card(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    match workspace(&app, &id).await {
        Ok((w, profile)) => {
            let url = card::a2a_url(&headers, &w);
            Json(card::card(&w, &profile, &url)).into_response()
        }
        Err(e) => e.into_response(),
    }
}

/// `POST /workspaces/{id}/a2a`
pub async fn rpc(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let limit = app.ctx.config.ingest.max_body_bytes.min(MAX_BODY_BYTES);
    let body = match api_body(limit, body) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let (w, profile) = match workspace(&app, &id).await {
        Ok(found) => found,
        Err(e) => return e.into_response(),
    };
    let count = |method: &str, outcome: &str| {
        app.ctx
            .metrics
            .http
            .a2a_requests
            .with_label_values(&[method, outcome])
            .inc();
    };
    let call = match rpc::parse(&body) {
        Ok(call) => call,
        Err(refused) => {
            count(
                rpc::method_label(refused.method.as_deref()),
                refused.error.code.label(),
            );
            return answer(rpc::failure(&refused.id, &refused.error));
        }
    };
    let name = call.method.name;
    // A version the caller insists on must be one served here (the method names the
    // version of the shapes it is answered in).
    if let Some(asked) = headers.get("a2a-version").and_then(|v| v.to_str().ok())
        && Version::from_header(asked).is_none()
    {
        let error = RpcError::new(
            Code::VersionNotSupported,
            format!("A2A-Version {asked} is not served: 0.3 and 1.0 are"),
        );
        count(name, error.code.label());
        return answer(rpc::failure(&call.id, &error));
    }
    let context = methods::Context {
        app: &app,
        caller: &caller,
        headers: &headers,
        workspace: &w,
        profile: &profile,
        version: call.method.version,
    };
    let result = match call.method.op {
        // A stream answers with events, its errors before the first one as a plain answer.
        Op::Stream => match methods::stream(&context, &call.id, &call.params).await {
            Ok(events) => {
                count(name, "ok");
                return events;
            }
            Err(e) => Err(e),
        },
        Op::Send => methods::send(&context, &call.params).await,
        Op::Get => methods::get(&context, &call.params).await,
        Op::Cancel => methods::cancel(&context, &call.params).await,
    };
    match result {
        Ok(result) => {
            count(name, "ok");
            answer(rpc::success(&call.id, result))
        }
        Err(error) => {
            count(name, error.code.label());
            answer(rpc::failure(&call.id, &error))
        }
    }
}

/// A JSON-RPC answer: always HTTP 200, the outcome is in the body.
fn answer(body: serde_json::Value) -> Response {
    Json(body).into_response()
}
