//! How the operator tools say no: a [`ToolError`] with a stable [`ErrorCode`], which the
//! protocol core turns into a tool result with `isError: true` and the error object
//! `{code, message, …}` as structured content (docs/operator-mcp.md, "Limits and errors").

use hermes_db::DbError;
use hermes_mcp_server::Refusal;
use serde_json::Value;

/// The code of a tool's refusal, as clients match on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// An argument is missing, of the wrong type, unknown, or out of bounds.
    InvalidArgument,
    /// No such conversation, message or approval.
    NotFound,
    /// The caller is over a rate limit of this tool; retry later.
    RateLimited,
    /// `messages_send` to a chat no user is linked to.
    UnknownChat,
    /// PostgreSQL (or another dependency) could not be reached; retry.
    Unavailable,
    /// An allow of a call whose deadline has passed: the call was timed out instead.
    DeadlinePassed,
}

impl ErrorCode {
    /// The code on the wire (and the `outcome` label of `hermes_operator_mcp_calls_total`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::UnknownChat => "UNKNOWN_CHAT",
            ErrorCode::Unavailable => "UNAVAILABLE",
            ErrorCode::DeadlinePassed => "DEADLINE_PASSED",
        }
    }
}

/// A tool's refusal: a code, and the refusal as the protocol core carries it (the code on
/// the wire, a message for a person, structured details such as the `argument` at fault).
#[derive(Clone, Debug)]
pub struct ToolError {
    pub code: ErrorCode,
    pub refusal: Refusal,
}

impl ToolError {
    /// A refusal with `code`.
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

    /// Nothing of that id.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// Add a field to the error object.
    pub fn with(self, key: &str, value: impl Into<Value>) -> Self {
        Self {
            refusal: self.refusal.with(key, value),
            ..self
        }
    }
}

impl From<DbError> for ToolError {
    fn from(e: DbError) -> Self {
        tracing::warn!(error = %e, "operator MCP call could not reach PostgreSQL");
        ToolError::new(ErrorCode::Unavailable, "the database is unavailable; retry")
    }
}

impl From<tokio_postgres::Error> for ToolError {
    fn from(e: tokio_postgres::Error) -> Self {
        ToolError::from(DbError::from(e))
    }
}
