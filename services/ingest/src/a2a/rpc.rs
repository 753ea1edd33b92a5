//! The JSON-RPC 2.0 envelope of A2A (docs/a2a.md): a request read into a [`Call`] (its id,
//! its [`Method`] and params), the two protocol versions' method names, the error codes of
//! JSON-RPC and of A2A (the specification's `JSONRPCErrorResponse`, and the 1.0 error
//! table: `TaskNotFoundError` -32001, `TaskNotCancelableError` -32002, …), and the answers.
//! Errors are answered with HTTP 200, as the JSON-RPC binding writes them: the caller reads
//! the error from the body.

use serde_json::{Value, json};

/// A protocol version a method belongs to: its name says which (`message/send` is 0.3,
/// `SendMessage` 1.0), and a task is shown in that version's shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// A2A 0.3: slash-separated methods, `kind` discriminators, kebab-case states.
    V03,
    /// A2A 1.0: PascalCase methods, member-based unions, `TASK_STATE_*` states.
    V10,
}

impl Version {
    /// The version as the agent card and the `A2A-Version` header write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V03 => "0.3",
            Version::V10 => "1.0",
        }
    }

    /// The version an `A2A-Version` header value names (`0.3`, `1.0`, a patch level
    /// ignored), if it is one served here.
    pub fn from_header(value: &str) -> Option<Self> {
        let mut parts = value.trim().split('.');
        let major = parts.next()?;
        let minor = parts.next().unwrap_or("0");
        match (major, minor) {
            ("0", "3") => Some(Version::V03),
            ("1", "0") => Some(Version::V10),
            _ => None,
        }
    }
}

/// What a served method does, in either version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `message/send`, `SendMessage`: start a task and answer with it.
    Send,
    /// `message/stream`, `SendStreamingMessage`: start a task and stream its updates.
    Stream,
    /// `tasks/get`, `GetTask`.
    Get,
    /// `tasks/cancel`, `CancelTask`.
    Cancel,
}

/// The served methods, by name.
const SERVED: &[(&str, Op, Version)] = &[
    ("message/send", Op::Send, Version::V03),
    ("message/stream", Op::Stream, Version::V03),
    ("tasks/get", Op::Get, Version::V03),
    ("tasks/cancel", Op::Cancel, Version::V03),
    ("SendMessage", Op::Send, Version::V10),
    ("SendStreamingMessage", Op::Stream, Version::V10),
    ("GetTask", Op::Get, Version::V10),
    ("CancelTask", Op::Cancel, Version::V10),
];

/// Methods of the specification this agent does not offer (its card says so), answered with
/// the error the specification gives for each rather than "method not found".
const DECLINED: &[(&str, Code)] = &[
    ("tasks/pushNotificationConfig/set", Code::PushNotSupported),
    ("tasks/pushNotificationConfig/get", Code::PushNotSupported),
    ("tasks/pushNotificationConfig/list", Code::PushNotSupported),
    (
        "tasks/pushNotificationConfig/delete",
        Code::PushNotSupported,
    ),
    ("CreateTaskPushNotificationConfig", Code::PushNotSupported),
    ("GetTaskPushNotificationConfig", Code::PushNotSupported),
    ("ListTaskPushNotificationConfigs", Code::PushNotSupported),
    ("DeleteTaskPushNotificationConfig", Code::PushNotSupported),
    (
        "agent/getAuthenticatedExtendedCard",
        Code::ExtendedCardNotConfigured,
    ),
    ("GetExtendedAgentCard", Code::ExtendedCardNotConfigured),
    ("tasks/resubscribe", Code::UnsupportedOperation),
    ("SubscribeToTask", Code::UnsupportedOperation),
    ("tasks/list", Code::UnsupportedOperation),
    ("ListTasks", Code::UnsupportedOperation),
];

/// A served method: what it does and in which version it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Method {
    pub name: &'static str,
    pub op: Op,
    pub version: Version,
}

/// The error codes of the JSON-RPC binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    Internal,
    TaskNotFound,
    TaskNotCancelable,
    PushNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    ExtendedCardNotConfigured,
    VersionNotSupported,
}

impl Code {
    /// The number on the wire.
    pub fn number(self) -> i32 {
        match self {
            Code::ParseError => -32700,
            Code::InvalidRequest => -32600,
            Code::MethodNotFound => -32601,
            Code::InvalidParams => -32602,
            Code::Internal => -32603,
            Code::TaskNotFound => -32001,
            Code::TaskNotCancelable => -32002,
            Code::PushNotSupported => -32003,
            Code::UnsupportedOperation => -32004,
            Code::ContentTypeNotSupported => -32005,
            Code::ExtendedCardNotConfigured => -32007,
            Code::VersionNotSupported => -32009,
        }
    }

    /// The name in metric labels.
    pub fn label(self) -> &'static str {
        match self {
            Code::ParseError => "parse_error",
            Code::InvalidRequest => "invalid_request",
            Code::MethodNotFound => "method_not_found",
            Code::InvalidParams => "invalid_params",
            Code::Internal => "internal_error",
            Code::TaskNotFound => "task_not_found",
            Code::TaskNotCancelable => "task_not_cancelable",
            Code::PushNotSupported => "push_notification_not_supported",
            Code::UnsupportedOperation => "unsupported_operation",
            Code::ContentTypeNotSupported => "content_type_not_supported",
            Code::ExtendedCardNotConfigured => "extended_card_not_configured",
            Code::VersionNotSupported => "version_not_supported",
        }
    }
}

/// A JSON-RPC error: its code and a message for the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RpcError {
    pub code: Code,
    pub message: String,
}

impl RpcError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// `-32602`, naming what is wrong with the params.
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidParams, message)
    }

    /// `-32603`: a dependency could not be reached.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Code::Internal, message)
    }
}

/// A request read from a body: its id (answered back), its method and its params
/// (`Null` when absent).
#[derive(Debug)]
pub struct Call {
    pub id: Value,
    pub method: Method,
    pub params: Value,
}

/// A request that is refused: the id to answer with (`null` when it could not be read),
/// the method's name when it named one (for the metric), and the error.
#[derive(Debug)]
pub struct Refused {
    pub id: Value,
    pub method: Option<String>,
    pub error: RpcError,
}

/// Read `body` as one JSON-RPC request of a served method.
pub fn parse(body: &[u8]) -> Result<Call, Refused> {
    let refuse = |id: Value, method: Option<String>, code, message: &str| Refused {
        id,
        method,
        error: RpcError::new(code, message),
    };
    let value: Value = serde_json::from_slice(body).map_err(|e| Refused {
        id: Value::Null,
        method: None,
        error: RpcError::new(Code::ParseError, format!("the body is not JSON: {e}")),
    })?;
    let Value::Object(mut request) = value else {
        let what = if value.is_array() {
            "batch requests are not served: send one request object"
        } else {
            "a request is a JSON object"
        };
        return Err(refuse(Value::Null, None, Code::InvalidRequest, what));
    };
    // An id is a string or a whole number (JSON-RPC: numbers SHOULD NOT have fractional
    // parts); a request without one would be a notification, which no A2A method is.
    let id = match request.remove("id") {
        Some(id @ Value::String(_)) => id,
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n),
        _ => {
            return Err(refuse(
                Value::Null,
                None,
                Code::InvalidRequest,
                "id must be a string or a whole number (A2A methods are requests, never notifications)",
            ));
        }
    };
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(refuse(
            id,
            None,
            Code::InvalidRequest,
            "jsonrpc must be \"2.0\"",
        ));
    }
    let Some(Value::String(name)) = request.remove("method") else {
        return Err(refuse(
            id,
            None,
            Code::InvalidRequest,
            "method must be a string",
        ));
    };
    let params = request.remove("params").unwrap_or(Value::Null);
    if !(params.is_object() || params.is_null()) {
        return Err(Refused {
            id,
            method: Some(name),
            error: RpcError::params("params must be an object"),
        });
    }
    if let Some((served, op, version)) = SERVED.iter().find(|(n, _, _)| *n == name) {
        return Ok(Call {
            id,
            method: Method {
                name: served,
                op: *op,
                version: *version,
            },
            params,
        });
    }
    let error = match DECLINED.iter().find(|(n, _)| *n == name) {
        Some((_, code)) => RpcError::new(*code, format!("{name} is not offered by this agent")),
        None => RpcError::new(Code::MethodNotFound, format!("no method {name:?}")),
    };
    Err(Refused {
        id,
        method: Some(name),
        error,
    })
}

/// The metric label of a method name a caller sent: a known one as sent, else `unknown`
/// (a caller must not grow the label set).
pub fn method_label(name: Option<&str>) -> &'static str {
    let Some(name) = name else {
        return "unknown";
    };
    SERVED
        .iter()
        .map(|(n, _, _)| *n)
        .chain(DECLINED.iter().map(|(n, _)| *n))
        .find(|n| *n == name)
        .unwrap_or("unknown")
}

/// A success answer.
pub fn success(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error answer.
pub fn failure(id: &Value, error: &RpcError) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": error.code.number(), "message": error.message},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &str) -> (Value, i32) {
        let r = parse(body.as_bytes()).unwrap_err();
        (r.id, r.error.code.number())
    }

    #[test]
    fn each_bad_request_gets_the_specs_code() {
        assert_eq!(refused("{nope"), (Value::Null, -32700));
        assert_eq!(refused("[]"), (Value::Null, -32600));
        assert_eq!(refused("3"), (Value::Null, -32600));
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","method":"tasks/get"}"#),
            (Value::Null, -32600),
            "a notification"
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":2.5e-42,"method":"tasks/get"}"#),
            (Value::Null, -32600),
            "a fractional id"
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"1.0","id":1,"method":"tasks/get"}"#),
            (json!(1), -32600)
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":"a","method":7}"#),
            (json!("a"), -32600)
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":"a","method":"tasks/explode"}"#),
            (json!("a"), -32601)
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":"a","method":"GetTask","params":[1]}"#),
            (json!("a"), -32602)
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":2,"method":"tasks/pushNotificationConfig/set"}"#),
            (json!(2), -32003)
        );
        assert_eq!(
            refused(r#"{"jsonrpc":"2.0","id":2,"method":"ListTasks"}"#),
            (json!(2), -32004)
        );
    }

    #[test]
    fn both_versions_names_are_served() {
        for (name, op, version) in SERVED {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": name, "params": {}});
            let call = parse(body.to_string().as_bytes()).unwrap();
            assert_eq!((call.method.op, call.method.version), (*op, *version));
            assert_eq!(method_label(Some(name)), *name);
        }
        assert_eq!(method_label(Some("x/y")), "unknown");
        assert_eq!(Version::from_header("1.0"), Some(Version::V10));
        assert_eq!(Version::from_header("0.3.0"), Some(Version::V03));
        assert_eq!(Version::from_header("2.0"), None);
    }
}
