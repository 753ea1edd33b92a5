//! How the agent MCP surface says no. A tool's refusal (unauthorized, not found, a run that
//! ended, a mode that forbids the mutation, a bad argument) is a [`ToolError`] with a stable
//! code: on JSON-RPC it is a tool result with `isError: true` and the error as structured
//! content, on the REST alias the body `{"error": {…}}` with a fitting HTTP status. Protocol
//! faults (unparsable JSON, an unknown method) are JSON-RPC errors (`hermes_mcp_server::RpcCode`).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_db::DbError;
use hermes_mcp_server::Refusal;
use serde_json::{Value, json};

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
    /// A limit of what the agent may store was reached (the details name it).
    LimitExceeded,
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
            ErrorCode::LimitExceeded => "LIMIT_EXCEEDED",
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
            ErrorCode::LimitExceeded => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// A tool's refusal: a code, and the refusal as the protocol core carries it (the code on
/// the wire, a message for the agent's operator, structured details such as
/// `engagementMode` and `tool` of a mode refusal).
#[derive(Clone, Debug)]
pub struct ToolError {
    pub code: ErrorCode,
    pub refusal: Refusal,
}

impl ToolError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            refusal: Refusal::new(code.as_str(), message),
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
    pub fn with(self, key: &str, value: impl Into<Value>) -> Self {
        Self {
            refusal: self.refusal.with(key, value),
            ..self
        }
    }

    /// The error object `{code, message, …details}`.
    pub fn body(&self) -> Value {
        self.refusal.body()
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
