//! How the agent MCP surface says no. A tool's refusal (unauthorized, not found, a run that
//! ended, a mode that forbids the mutation, a bad argument) is a [`ToolError`] with a stable
//! code: on JSON-RPC it is a tool result with `isError: true` and the error as structured
//! content, on the REST alias the body `{"error": {…}}` with a fitting HTTP status. Protocol
//! faults (unparsable JSON, an unknown method) are JSON-RPC errors ([`RpcCode`]).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_db::DbError;
use serde_json::{Map, Value, json};

/// The code of a tool's refusal, as agents match on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// The key speaks for no agent (or the agent is gone).
    Unauthorized,
    /// No such run or draft of the calling agent (another agent's looks the same).
    NotFound,
    /// The run is closed, or its one reply was already given (answered, failed, expired).
    RunEnded,
    /// The run's engagement mode forbids mutations beyond its own reply.
    MutationNotAllowed,
    /// An argument is missing, of the wrong type, or out of bounds.
    InvalidArgument,
    /// No tool of that name.
    UnknownTool,
    /// PostgreSQL could not be reached; retry.
    Unavailable,
}

impl ErrorCode {
    /// The code on the wire (and the `outcome` label of `hermes_mcp_calls_total`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthorized => "UNAUTHORIZED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::RunEnded => "RUN_ENDED",
            ErrorCode::MutationNotAllowed => "MUTATION_NOT_ALLOWED",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::UnknownTool => "UNKNOWN_TOOL",
            ErrorCode::Unavailable => "UNAVAILABLE",
        }
    }

    /// The HTTP status of the REST alias for this code.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::Unauthorized | ErrorCode::MutationNotAllowed => StatusCode::FORBIDDEN,
            ErrorCode::NotFound | ErrorCode::UnknownTool => StatusCode::NOT_FOUND,
            ErrorCode::RunEnded => StatusCode::CONFLICT,
            ErrorCode::InvalidArgument => StatusCode::BAD_REQUEST,
            ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// A tool's refusal: a code, a message for the agent's operator, and structured details.
#[derive(Clone, Debug)]
pub struct ToolError {
    pub code: ErrorCode,
    pub message: String,
    /// More fields of the error object (e.g. `engagementMode` and `tool` of a mode refusal).
    pub details: Map<String, Value>,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: Map::new(),
        }
    }

    /// A bad argument.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    /// No such run of the calling agent.
    pub fn run_not_found() -> Self {
        Self::new(ErrorCode::NotFound, "no such run of this agent")
    }

    /// The run's reply was given already, or the run is closed.
    pub fn run_ended() -> Self {
        Self::new(
            ErrorCode::RunEnded,
            "the run has ended: its reply was already given (answered, failed or expired)",
        )
    }

    /// Add a field to the error object.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.into(), value.into());
        self
    }

    /// The error object `{code, message, …details}`.
    pub fn body(&self) -> Value {
        let mut o = self.details.clone();
        o.insert("code".into(), json!(self.code.as_str()));
        o.insert("message".into(), json!(self.message));
        Value::Object(o)
    }

    /// As the REST alias answers it: the fleet's error shape (docs/api.md) with the tool's
    /// code and details.
    pub fn into_rest(self) -> Response {
        let status = self.code.status();
        let kind = match status.as_u16() {
            401 | 403 => "authentication_error",
            400..=499 => "invalid_request_error",
            _ => "server_error",
        };
        let mut error = self.body();
        if let Value::Object(o) = &mut error {
            o.insert("type".into(), json!(kind));
        }
        let mut resp = (status, Json(json!({ "error": error }))).into_response();
        if self.code == ErrorCode::Unavailable {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, 5.into());
        }
        resp
    }
}

impl From<DbError> for ToolError {
    fn from(e: DbError) -> Self {
        tracing::warn!(error = %e, "agent MCP call could not reach PostgreSQL");
        ToolError::new(ErrorCode::Unavailable, "the database is unavailable; retry")
    }
}

/// The JSON-RPC 2.0 error codes the surface answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcCode {
    /// The body is not JSON.
    ParseError,
    /// Not a JSON-RPC request (a batch included: not supported).
    InvalidRequest,
    /// No such method.
    MethodNotFound,
    /// Bad params, or an unknown tool.
    InvalidParams,
    /// The key is missing or not valid, or over its request rate.
    Unauthorized,
    /// Over the key's request rate.
    RateLimited,
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
        }
    }
}
