//! The protocol core of Hermes' MCP servers (docs/operator-mcp.md, docs/agents.md "The
//! agent's side"): JSON-RPC 2.0 speaking MCP, independent of the transport. A transport
//! (streamable HTTP answered with `application/json`, or newline-delimited stdio) hands
//! each message it reads to [`handle`] with the [`ToolSet`] of the caller, and writes the
//! [`Reply`] back however it writes.
//!
//! What is checked here, once for every server: a message is one JSON object (batches,
//! dropped from MCP in 2025-06-18, are refused), `jsonrpc` is `"2.0"`, an `id` is a string
//! or an integer, `params` is an object; a notification (no `id`) and a response from the
//! client (to a request this server never sends) get no answer. Served methods are
//! `initialize` (a served protocol version is echoed, another gets the newest), `ping`,
//! `tools/list` and `tools/call`. An unknown tool or malformed call params are JSON-RPC
//! errors (`-32602`); a tool's refusal is a result with `isError: true` and the error as
//! structured content, so the model reading it can correct itself.

use std::future::Future;

use serde_json::{Map, Value, json};

/// The protocol versions served, newest first; an unknown one asked for gets the newest.
pub const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// The JSON-RPC 2.0 error codes Hermes' MCP servers answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcCode {
    /// The message is not JSON.
    ParseError,
    /// Not a JSON-RPC request (a batch included: not supported).
    InvalidRequest,
    /// No such method.
    MethodNotFound,
    /// Bad params, or an unknown tool.
    InvalidParams,
    /// The key is missing or not valid.
    Unauthorized,
    /// Over the key's request rate.
    RateLimited,
    /// The key is valid but may not use this server.
    Forbidden,
}

impl RpcCode {
    /// The numeric code.
    pub fn code(self) -> i64 {
        match self {
            RpcCode::ParseError => -32700,
            RpcCode::InvalidRequest => -32600,
            RpcCode::MethodNotFound => -32601,
            RpcCode::InvalidParams => -32602,
            // Implementation-defined server errors (-32000 to -32099).
            RpcCode::Unauthorized => -32001,
            RpcCode::RateLimited => -32002,
            RpcCode::Forbidden => -32003,
        }
    }
}

/// A JSON-RPC error message.
pub fn error(id: Value, code: RpcCode, message: impl Into<String>) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": code.code(), "message": message.into() },
    })
}

/// A JSON-RPC result message.
pub fn result(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// What the server says of itself in `initialize`.
#[derive(Clone, Debug)]
pub struct ServerInfo {
    /// The server's name (`serverInfo.name`).
    pub name: &'static str,
    /// Its human title.
    pub title: &'static str,
    /// Its version.
    pub version: &'static str,
    /// How a client's model should use it.
    pub instructions: &'static str,
}

/// Why a `tools/call` did not give a result.
#[derive(Clone, Debug, PartialEq)]
pub enum CallError {
    /// No tool of that name: a JSON-RPC error (`-32602`).
    UnknownTool(String),
    /// The tool refused: a result with `isError: true`.
    Refused(Refusal),
}

/// A tool's refusal: the error object `{code, message, …}` and a line for the text content.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// The stable code clients match on (e.g. `INVALID_ARGUMENT`).
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// More fields of the error object.
    pub details: Map<String, Value>,
}

impl Refusal {
    /// A refusal with `code` and `message`, no details.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// Add a field to the error object.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.into(), value.into());
        self
    }

    /// The error object `{code, message, …details}`.
    pub fn body(&self) -> Value {
        let mut o = self.details.clone();
        o.insert("code".into(), json!(self.code));
        o.insert("message".into(), json!(self.message));
        Value::Object(o)
    }
}

/// The optional integer argument `name` of a tool call's `args`, within `min..=max`: none
/// when absent or null; otherwise the sentence telling the caller what it must be. Both
/// servers' tools read their paging and bound arguments with it.
pub fn int_argument(
    args: &Map<String, Value>,
    name: &str,
    min: i64,
    max: i64,
) -> Result<Option<i64>, String> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(format!("{name} must be an integer from {min} to {max}")),
        },
    }
}

/// The tools of one server as one caller sees them. A value is made per request (or per
/// stdio process) and carries the caller's identity, so the core knows nothing of keys.
pub trait ToolSet: Sync {
    /// The listing of `tools/list`: `{name, description, inputSchema}` of each tool.
    fn list(&self) -> Vec<Value>;

    /// Run tool `name` with `args` (a JSON object, or `null` when none were given).
    fn call(
        &self,
        name: &str,
        args: Value,
    ) -> impl Future<Output = Result<Value, CallError>> + Send;
}

/// The answer to one message.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Nothing to answer (a notification, or a response from the client). On HTTP:
    /// `202 Accepted` with no body.
    Nothing,
    /// A JSON-RPC message; `malformed` when the message itself was not a valid request (an
    /// HTTP transport answers it with `400`).
    Message { body: Value, malformed: bool },
}

impl Reply {
    fn ok(body: Value) -> Self {
        Reply::Message {
            body,
            malformed: false,
        }
    }

    fn malformed(id: Value, message: impl Into<String>) -> Self {
        Reply::Message {
            body: error(id, RpcCode::InvalidRequest, message),
            malformed: true,
        }
    }
}

/// Parse the bytes of one message; the error is the reply to give.
pub fn parse(bytes: &[u8]) -> Result<Value, Reply> {
    serde_json::from_slice(bytes).map_err(|e| Reply::Message {
        body: error(
            Value::Null,
            RpcCode::ParseError,
            format!("the message is not JSON: {e}"),
        ),
        malformed: true,
    })
}

/// Answer one parsed message with `tools`.
pub async fn handle<T: ToolSet>(info: &ServerInfo, tools: &T, message: Value) -> Reply {
    let Value::Object(m) = message else {
        return Reply::malformed(
            Value::Null,
            if message.is_array() {
                "batches are not supported: send one JSON-RPC message at a time"
            } else {
                "a JSON-RPC message is an object"
            },
        );
    };
    let id = m.get("id").cloned();
    if let Some(id) = &id
        && !(id.is_string() || id.is_i64() || id.is_u64())
    {
        return Reply::malformed(Value::Null, "id must be a string or an integer");
    }
    if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Reply::malformed(id.unwrap_or(Value::Null), "jsonrpc must be \"2.0\"");
    }
    let Some(method) = m.get("method").and_then(Value::as_str) else {
        // A response from the client (to a request this server never sends) or garbage.
        if id.is_some() && (m.contains_key("result") || m.contains_key("error")) {
            return Reply::Nothing;
        }
        return Reply::malformed(id.unwrap_or(Value::Null), "method must be a string");
    };
    let params = m.get("params").cloned().unwrap_or(Value::Null);
    if !(params.is_null() || params.is_object()) {
        return Reply::malformed(id.unwrap_or(Value::Null), "params must be an object");
    }
    // A notification (no id) is taken and not answered.
    let Some(id) = id else {
        return Reply::Nothing;
    };
    Reply::ok(match method {
        "initialize" => result(id, initialize(info, &params)),
        "ping" => result(id, json!({})),
        "tools/list" => result(id, json!({ "tools": tools.list() })),
        "tools/call" => call_tool(tools, id, params).await,
        other => error(
            id,
            RpcCode::MethodNotFound,
            format!(
                "method {other:?} not found (served: initialize, ping, tools/list, tools/call)"
            ),
        ),
    })
}

/// The answer to `initialize`: the client's protocol version when it is one served, else
/// the newest served (the client then decides whether it can speak it).
pub fn initialize(info: &ServerInfo, params: &Value) -> Value {
    let asked = params["protocolVersion"].as_str().unwrap_or_default();
    let version = PROTOCOL_VERSIONS
        .iter()
        .find(|v| **v == asked)
        .unwrap_or(&PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": info.name, "title": info.title, "version": info.version },
        "instructions": info.instructions,
    })
}

/// `tools/call`.
async fn call_tool<T: ToolSet>(tools: &T, id: Value, params: Value) -> Value {
    let Some(name) = params["name"].as_str() else {
        return error(
            id,
            RpcCode::InvalidParams,
            "params.name must be the tool's name",
        );
    };
    let args = params.get("arguments").cloned().unwrap_or(Value::Null);
    if !(args.is_null() || args.is_object()) {
        return error(
            id,
            RpcCode::InvalidParams,
            "params.arguments must be an object",
        );
    }
    match tools.call(name, args).await {
        Ok(value) => result(
            id,
            json!({
                "content": [{ "type": "text", "text": value.to_string() }],
                "structuredContent": value,
                "isError": false,
            }),
        ),
        Err(CallError::UnknownTool(name)) => error(
            id,
            RpcCode::InvalidParams,
            format!("unknown tool {name:?} (tools/list names them)"),
        ),
        Err(CallError::Refused(r)) => result(
            id,
            json!({
                "content": [{ "type": "text", "text": format!("{}: {}", r.code, r.message) }],
                "structuredContent": { "error": r.body() },
                "isError": true,
            }),
        ),
    }
}

#[cfg(test)]
mod tests;
