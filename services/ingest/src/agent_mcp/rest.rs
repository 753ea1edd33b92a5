//! `POST /api/mcp/{tool}`: the REST alias of the agent MCP surface, friendlier to scripts.
//! The body is the tool's arguments as a flat JSON object (empty: none); the answer is the
//! tool's result as JSON, or the fleet's error shape `{"error": {code, message, type, …}}`
//! with a status that fits the code (docs/agents.md, "The agent's side").

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::response::{IntoResponse, Response};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use serde_json::Value;

use super::auth::identify;
use super::errors::{ErrorCode, ToolError};
use super::tools::{self, Tool};
use crate::AppState;
use crate::mcp_http::Refused;

/// `POST /api/mcp/{tool}`. The key is checked before the body is read.
pub async fn handle(
    State(app): State<AppState>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    let identity = match identify(&app, req.headers(), req.extensions()).await {
        Ok(i) => i,
        Err(Refused::Unauthenticated) => return ApiError::unauthorized().into_response(),
        Err(Refused::RateLimited(secs)) => {
            return ApiError {
                retry_after: Some(secs),
                ..ApiError::new(
                    axum::http::StatusCode::TOO_MANY_REQUESTS,
                    ApiErrorCode::RateLimited,
                    "this key is over its request rate",
                )
            }
            .into_response();
        }
        Err(Refused::Forbidden(why)) => {
            return ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                ApiErrorCode::Forbidden,
                why,
            )
            .into_response();
        }
        Err(Refused::Unavailable(e)) => return e.into_response(),
    };
    let Some(tool) = Tool::parse(&name) else {
        tools::count_unknown(&app);
        return ToolError::new(
            ErrorCode::UnknownTool,
            format!("no tool {name:?}: POST /api/mcp/rpc with tools/list names them"),
        )
        .into_rest();
    };
    let body = Bytes::from_request(req, &app).await;
    let body = match crate::body_or_error(app.ctx.config.ingest.max_body_bytes, body) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let args: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => {
                return ToolError::invalid(format!("the body is not JSON: {e}")).into_rest();
            }
        }
    };
    match tools::call(&app, identity, tool, args).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => e.into_rest(),
    }
}
