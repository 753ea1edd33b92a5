//! The streamable HTTP transport of Hermes' MCP servers (the agent surface at
//! `/api/mcp/rpc`, the operator server at `/mcp`), stateless: every request is answered on
//! its own with `application/json` (which the transport allows in place of an SSE stream),
//! no `Mcp-Session-Id` is issued, and nothing is remembered between requests, so any ingest
//! replica answers any request and the official SDK clients connect unchanged. The
//! protocol itself is `hermes-mcp-server`'s; this module maps its [`Reply`] to HTTP
//! (`202` with no body for nothing to answer, `400` for a malformed message) and says no
//! before any tool runs (`401`, `403`, `429`, `405`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::FromRequest;
use axum::extract::Request;
use axum::http::header::{ALLOW, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hermes_mcp_server::{PROTOCOL_VERSIONS, Reply, RpcCode, ServerInfo, ToolSet, error};
use hermes_runtime::http::ApiError;
use serde_json::Value;

use crate::AppState;
use crate::front_door::{Client, Screened};
use crate::rest::{Caller, bearer_of, resolve};

/// A JSON-RPC error answer with HTTP `status`.
pub fn error_response(status: StatusCode, code: RpcCode, message: impl Into<String>) -> Response {
    (status, Json(error(Value::Null, code, message))).into_response()
}

/// Why a request was refused before any tool ran.
#[derive(Debug)]
pub enum Refused {
    /// No Bearer key, or not a live key.
    Unauthenticated,
    /// A live key that may not use this server (the message says what it needs).
    Forbidden(&'static str),
    /// Over the key's request rate: retry after this many seconds.
    RateLimited(u64),
    /// The key could not be checked (PostgreSQL unreachable).
    Unavailable(ApiError),
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::Unauthenticated => {
                let mut resp = error_response(
                    StatusCode::UNAUTHORIZED,
                    RpcCode::Unauthorized,
                    "missing or invalid API key: send Authorization: Bearer <key>",
                );
                resp.headers_mut()
                    .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                resp
            }
            Refused::Forbidden(why) => {
                error_response(StatusCode::FORBIDDEN, RpcCode::Forbidden, why)
            }
            Refused::RateLimited(secs) => {
                let mut resp = error_response(
                    StatusCode::TOO_MANY_REQUESTS,
                    RpcCode::RateLimited,
                    "this key is over its request rate",
                );
                resp.headers_mut().insert(RETRY_AFTER, secs.into());
                resp
            }
            Refused::Unavailable(e) => e.into_response(),
        }
    }
}

/// The live key of a request's Bearer (the operator key, or a key of `hermes api-keys`,
/// cached briefly), before any rate or scope is checked: as resolved before the request took
/// its slot (`crate::front_door::screen_bearer`, which refused an unknown key there, leaves
/// it in `extensions`), else resolved now.
pub async fn key_of(
    app: &AppState,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Result<Caller, Refused> {
    let key = bearer_of(headers).ok_or(Refused::Unauthenticated)?;
    let found = match extensions.get::<Screened>() {
        Some(Screened::Known(caller)) => Ok(Some(caller.clone())),
        // A JWT speaks for an agent on the agent surface only (its own check, before this).
        Some(Screened::Agent(_)) => Ok(None),
        None => {
            let client = extensions.get::<Client>().and_then(|c| c.0);
            resolve(app, &key, client).await
        }
    };
    found
        .map_err(Refused::Unavailable)?
        .ok_or(Refused::Unauthenticated)
}

/// `GET` and `DELETE` of an MCP endpoint at `path`: no stream to open, no session to end.
pub fn not_allowed(path: &str) -> Response {
    let mut resp = error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        RpcCode::InvalidRequest,
        format!(
            "this MCP server is stateless: POST JSON-RPC requests to {path} (no SSE stream, no session)"
        ),
    );
    resp.headers_mut()
        .insert(ALLOW, HeaderValue::from_static("POST"));
    resp
}

/// Read the body of `req` (within `HERMES_MAX_BODY_BYTES`), check its protocol version
/// header, and answer its message with `tools`.
pub async fn serve<T: ToolSet>(
    app: &AppState,
    info: &ServerInfo,
    tools: &T,
    req: Request,
) -> Response {
    let headers: HeaderMap = req.headers().clone();
    let body = Bytes::from_request(req, app).await;
    let body = match crate::body_or_error(app.ctx.config.ingest.max_body_bytes, body) {
        Ok(b) => b,
        Err(e) => return error_response(e.status, RpcCode::InvalidRequest, e.message),
    };
    if let Some(v) = headers.get("mcp-protocol-version")
        && !v.to_str().is_ok_and(|v| PROTOCOL_VERSIONS.contains(&v))
    {
        return error_response(
            StatusCode::BAD_REQUEST,
            RpcCode::InvalidRequest,
            format!(
                "unsupported MCP-Protocol-Version; this server speaks {}",
                PROTOCOL_VERSIONS.join(", ")
            ),
        );
    }
    let reply = match hermes_mcp_server::parse(&body) {
        Ok(message) => hermes_mcp_server::handle(info, tools, message).await,
        Err(reply) => reply,
    };
    match reply {
        Reply::Nothing => StatusCode::ACCEPTED.into_response(),
        Reply::Message { body, malformed } => {
            let status = if malformed {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::OK
            };
            (status, Json(body)).into_response()
        }
    }
}
