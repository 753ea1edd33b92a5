//! `POST /api/mcp/rpc`: JSON-RPC 2.0 speaking MCP over streamable HTTP, stateless. Every
//! request is answered on its own with `application/json` (which the transport allows in
//! place of an SSE stream), no `Mcp-Session-Id` is issued, and nothing is remembered
//! between requests, so any ingest replica answers any request and the official SDK
//! clients connect unchanged. Notifications are taken with `202 Accepted` and no body;
//! batches (dropped from MCP in 2025-06-18) are refused as invalid requests. `GET` (a
//! server-to-client stream) and `DELETE` (ending a session) are `405`: there is neither.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request, State};
use axum::http::header::{ALLOW, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::auth::{Identity, Refused, identify};
use super::errors::RpcCode;
use super::tools::{self, Tool};
use crate::AppState;

/// The protocol versions served, newest first; an unknown one asked for gets the newest.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// A JSON-RPC error answer with HTTP `status`.
fn error(status: StatusCode, id: Value, code: RpcCode, message: impl Into<String>) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code.code(), "message": message.into() },
    });
    (status, Json(body)).into_response()
}

/// A JSON-RPC result answer.
fn result(id: Value, result: Value) -> Response {
    Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response()
}

/// The answer to a request refused before it was read.
fn refused(r: Refused) -> Response {
    match r {
        Refused::Unauthenticated => {
            let mut resp = error(
                StatusCode::UNAUTHORIZED,
                Value::Null,
                RpcCode::Unauthorized,
                "missing or invalid API key: send Authorization: Bearer <key>",
            );
            resp.headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            resp
        }
        Refused::RateLimited(secs) => {
            let mut resp = error(
                StatusCode::TOO_MANY_REQUESTS,
                Value::Null,
                RpcCode::RateLimited,
                "this key is over its request rate",
            );
            resp.headers_mut().insert(RETRY_AFTER, secs.into());
            resp
        }
        Refused::Unavailable(e) => e.into_response(),
    }
}

/// `GET` and `DELETE /api/mcp/rpc`: no stream to open, no session to end.
pub async fn not_allowed() -> Response {
    let mut resp = error(
        StatusCode::METHOD_NOT_ALLOWED,
        Value::Null,
        RpcCode::InvalidRequest,
        "this MCP server is stateless: POST JSON-RPC requests to /api/mcp/rpc (no SSE stream, no session)",
    );
    resp.headers_mut()
        .insert(ALLOW, HeaderValue::from_static("POST"));
    resp
}

/// `POST /api/mcp/rpc`. The key is checked before the body is read.
pub async fn handle(State(app): State<AppState>, req: Request) -> Response {
    let identity = match identify(&app, req.headers()).await {
        Ok(i) => i,
        Err(r) => return refused(r),
    };
    let headers = req.headers().clone();
    let body = Bytes::from_request(req, &app).await;
    let body = match crate::body_or_error(app.ctx.config.max_body_bytes, body) {
        Ok(b) => b,
        Err(e) => {
            return error(e.status, Value::Null, RpcCode::InvalidRequest, e.message);
        }
    };
    if let Some(v) = headers.get("mcp-protocol-version")
        && !v.to_str().is_ok_and(|v| PROTOCOL_VERSIONS.contains(&v))
    {
        return error(
            StatusCode::BAD_REQUEST,
            Value::Null,
            RpcCode::InvalidRequest,
            format!(
                "unsupported MCP-Protocol-Version; this server speaks {}",
                PROTOCOL_VERSIONS.join(", ")
            ),
        );
    }
    let message: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                RpcCode::ParseError,
                format!("the body is not JSON: {e}"),
            );
        }
    };
    dispatch(&app, identity, message).await
}

/// One JSON-RPC message.
async fn dispatch(app: &AppState, identity: Identity, message: Value) -> Response {
    let bad = |id: Value, message: &str| {
        error(
            StatusCode::BAD_REQUEST,
            id,
            RpcCode::InvalidRequest,
            message,
        )
    };
    let Value::Object(m) = message else {
        return bad(
            Value::Null,
            if message.is_array() {
                "batches are not supported: send one JSON-RPC message per request"
            } else {
                "a JSON-RPC message is an object"
            },
        );
    };
    let id = m.get("id").cloned();
    if let Some(id) = &id
        && !(id.is_string() || id.is_i64() || id.is_u64())
    {
        return bad(Value::Null, "id must be a string or an integer");
    }
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return bad(id.unwrap_or(Value::Null), "jsonrpc must be \"2.0\"");
    }
    let Some(method) = m.get("method").and_then(Value::as_str) else {
        // A response from the client (to a request this server never sends) or garbage.
        if id.is_some() && (m.contains_key("result") || m.contains_key("error")) {
            return StatusCode::ACCEPTED.into_response();
        }
        return bad(id.unwrap_or(Value::Null), "method must be a string");
    };
    let params = m.get("params").cloned().unwrap_or(Value::Null);
    if !(params.is_null() || params.is_object()) {
        return bad(id.unwrap_or(Value::Null), "params must be an object");
    }
    // A notification (no id) is taken and not answered: 202 with no body.
    let Some(id) = id else {
        return StatusCode::ACCEPTED.into_response();
    };
    match method {
        "initialize" => result(id, initialize(&params)),
        "ping" => result(id, json!({})),
        "tools/list" => result(
            id,
            json!({ "tools": Tool::ALL.iter().map(|t| t.listing()).collect::<Vec<_>>() }),
        ),
        "tools/call" => call_tool(app, identity, id, params).await,
        other => error(
            StatusCode::OK,
            id,
            RpcCode::MethodNotFound,
            format!(
                "method {other:?} not found (served: initialize, ping, tools/list, tools/call)"
            ),
        ),
    }
}

/// The answer to `initialize`: the client's protocol version when it is one served, else
/// the newest served (the client then decides whether it can speak it).
fn initialize(params: &Value) -> Value {
    let asked = params["protocolVersion"].as_str().unwrap_or_default();
    let version = PROTOCOL_VERSIONS
        .iter()
        .find(|v| **v == asked)
        .unwrap_or(&PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": "hermes-agents", "title": "Hermes agent inbox", "version": env!("CARGO_PKG_VERSION") },
        "instructions": "You are an external agent of Hermes. On every wake: inbox.list {status: unacked}, inbox.ack {runId} (always), context.bundle {runId}, then answer with chat.appendMessage (or a draft), or runs.fail.",
    })
}

/// `tools/call`: an unknown tool or malformed params are JSON-RPC errors; a tool's refusal
/// is a result with `isError: true` and the error as structured content.
async fn call_tool(app: &AppState, identity: Identity, id: Value, params: Value) -> Response {
    let Some(name) = params["name"].as_str() else {
        return error(
            StatusCode::OK,
            id,
            RpcCode::InvalidParams,
            "params.name must be the tool's name",
        );
    };
    let Some(tool) = Tool::parse(name) else {
        tools::count_unknown(app);
        return error(
            StatusCode::OK,
            id,
            RpcCode::InvalidParams,
            format!("unknown tool {name:?} (tools/list names them)"),
        );
    };
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    if !(args.is_null() || args.is_object()) {
        return error(
            StatusCode::OK,
            id,
            RpcCode::InvalidParams,
            "params.arguments must be an object",
        );
    }
    match tools::call(app, identity, tool, args).await {
        Ok(value) => result(
            id,
            json!({
                "content": [{ "type": "text", "text": value.to_string() }],
                "structuredContent": value,
                "isError": false,
            }),
        ),
        Err(e) => {
            let body = e.body();
            result(
                id,
                json!({
                    "content": [{ "type": "text", "text": format!("{}: {}", e.code.as_str(), e.message) }],
                    "structuredContent": { "error": body },
                    "isError": true,
                }),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_version_is_echoed_and_another_gets_the_newest() {
        for v in PROTOCOL_VERSIONS {
            assert_eq!(
                initialize(&json!({ "protocolVersion": v }))["protocolVersion"],
                v
            );
        }
        assert_eq!(
            initialize(&json!({ "protocolVersion": "2099-01-01" }))["protocolVersion"],
            PROTOCOL_VERSIONS[0]
        );
        assert_eq!(
            initialize(&Value::Null)["protocolVersion"],
            PROTOCOL_VERSIONS[0]
        );
    }
}
