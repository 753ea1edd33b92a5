//! The params of the served methods, read in either version's shapes (docs/a2a.md): a sent
//! message (0.3: `{"kind": "message", "role": "user", "parts": [{"kind": "text", …}]}`; 1.0:
//! `{"role": "ROLE_USER", "parts": [{"text": …}]}`), its `configuration` (0.3 `blocking`,
//! 1.0 `returnImmediately`; `historyLength` in both), and a task query (`{id,
//! historyLength}`). Everything the caller controls is bounded: parts, text, identifiers.

use serde_json::{Map, Value};

use super::rpc::{Code, RpcError, Version};

/// Most parts one message may carry.
pub const MAX_PARTS: usize = 32;
/// Most bytes of text one message may carry, its parts together.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// Longest identifier a caller names (`messageId`, `contextId`, `taskId`, a task's `id`).
pub const MAX_ID_BYTES: usize = 256;

/// A message sent to the workspace's agent, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incoming {
    pub message_id: String,
    /// The conversation it continues (`None`: a new one).
    pub context_id: Option<String>,
    /// The task it would continue (none of this agent's tasks can be continued).
    pub task_id: Option<String>,
    /// Its text parts, and its data parts as JSON, one per line.
    pub text: String,
}

/// `message/send`, `SendMessage` (and their streaming twins): the message and how to
/// answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendParams {
    pub message: Incoming,
    /// Wait for the task to end before answering (a blocking send).
    pub blocking: bool,
    pub history_length: Option<usize>,
}

/// `tasks/get`, `GetTask`, `tasks/cancel`, `CancelTask`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskQuery {
    pub id: String,
    pub history_length: Option<usize>,
}

fn object<'a>(v: &'a Value, name: &str) -> Result<&'a Map<String, Value>, RpcError> {
    v.as_object()
        .ok_or_else(|| RpcError::params(format!("{name} must be an object")))
}

/// An optional identifier: a non-empty string of at most [`MAX_ID_BYTES`].
fn identifier(o: &Map<String, Value>, name: &str) -> Result<Option<String>, RpcError> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() && s.len() <= MAX_ID_BYTES => Ok(Some(s.clone())),
        Some(_) => Err(RpcError::params(format!(
            "{name} must be a string of 1 to {MAX_ID_BYTES} bytes"
        ))),
    }
}

fn history_length(o: Option<&Map<String, Value>>) -> Result<Option<usize>, RpcError> {
    match o.and_then(|o| o.get("historyLength")) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|n| Some(n.min(u32::MAX as u64) as usize))
            .ok_or_else(|| RpcError::params("historyLength must be a non-negative integer")),
    }
}

/// A boolean of `configuration`, when set.
fn flag(o: Option<&Map<String, Value>>, name: &str) -> Result<Option<bool>, RpcError> {
    match o.and_then(|o| o.get(name)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(RpcError::params(format!(
            "configuration.{name} must be a boolean"
        ))),
    }
}

/// The params of a send, in `version`'s shapes.
pub fn send_params(version: Version, params: &Value) -> Result<SendParams, RpcError> {
    let params = object(params, "params")?;
    let message = object(
        params
            .get("message")
            .ok_or_else(|| RpcError::params("params.message is required"))?,
        "params.message",
    )?;
    let configuration = match params.get("configuration") {
        None | Some(Value::Null) => None,
        Some(c) => Some(object(c, "params.configuration")?),
    };
    // Both versions block by default: 0.3 unless `blocking: false`, 1.0 unless
    // `returnImmediately: true`.
    let blocking = match version {
        Version::V03 => flag(configuration, "blocking")?.unwrap_or(true),
        Version::V10 => !flag(configuration, "returnImmediately")?.unwrap_or(false),
    };
    Ok(SendParams {
        message: incoming(version, message)?,
        blocking,
        history_length: history_length(configuration)?,
    })
}

fn incoming(version: Version, m: &Map<String, Value>) -> Result<Incoming, RpcError> {
    let message_id = identifier(m, "messageId")?
        .ok_or_else(|| RpcError::params("message.messageId is required"))?;
    let user = match version {
        Version::V03 => "user",
        Version::V10 => "ROLE_USER",
    };
    if m.get("role").and_then(Value::as_str) != Some(user) {
        return Err(RpcError::params(format!(
            "message.role must be {user:?}: messages to an agent come from its user"
        )));
    }
    if version == Version::V03 && m.get("kind").is_some_and(|k| k.as_str() != Some("message")) {
        return Err(RpcError::params("message.kind must be \"message\""));
    }
    let parts = m
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| RpcError::params("message.parts must be an array"))?;
    if parts.is_empty() || parts.len() > MAX_PARTS {
        return Err(RpcError::params(format!(
            "message.parts takes 1 to {MAX_PARTS} parts"
        )));
    }
    let mut lines = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        lines.push(part_text(version, i, object(part, "a part")?)?);
    }
    let text = lines.join("\n");
    if text.len() > MAX_TEXT_BYTES {
        return Err(RpcError::params(format!(
            "the message's text is longer than {MAX_TEXT_BYTES} bytes"
        )));
    }
    if text.trim().is_empty() {
        return Err(RpcError::params("the message has no text"));
    }
    Ok(Incoming {
        message_id,
        context_id: identifier(m, "contextId")?,
        task_id: identifier(m, "taskId")?,
        text,
    })
}

/// What the model reads of one part: a text part's text, a data part's JSON. Files are
/// refused: the workspace's agent reads text (its card's input modes say so).
fn part_text(version: Version, i: usize, p: &Map<String, Value>) -> Result<String, RpcError> {
    let kind = match version {
        Version::V03 => p.get("kind").and_then(Value::as_str).unwrap_or(""),
        // 1.0 names a part by the member it sets.
        Version::V10 => ["text", "data", "url", "raw"]
            .into_iter()
            .find(|k| p.contains_key(*k))
            .unwrap_or(""),
    };
    match kind {
        "text" => p
            .get("text")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| RpcError::params(format!("parts[{i}].text must be a string"))),
        "data" => {
            let data = p
                .get("data")
                .ok_or_else(|| RpcError::params(format!("parts[{i}].data is required")))?;
            Ok(data.to_string())
        }
        "file" | "url" | "raw" => Err(RpcError::new(
            Code::ContentTypeNotSupported,
            format!("parts[{i}] is a file: this agent reads text and data parts"),
        )),
        _ => Err(RpcError::params(format!(
            "parts[{i}] is not a text, data or file part"
        ))),
    }
}

/// The params of a task query, the same in both versions.
pub fn task_query(params: &Value) -> Result<TaskQuery, RpcError> {
    let params = object(params, "params")?;
    let id = identifier(params, "id")?.ok_or_else(|| RpcError::params("params.id is required"))?;
    Ok(TaskQuery {
        id,
        history_length: history_length(Some(params))?,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_message_reads_in_both_versions() {
        let v03 = json!({"message": {"kind": "message", "messageId": "m1", "role": "user",
            "contextId": "c1", "parts": [{"kind": "text", "text": "hi"},
            {"kind": "data", "data": {"a": 1}}]}, "configuration": {"blocking": false}});
        let p = send_params(Version::V03, &v03).unwrap();
        assert_eq!(p.message.text, "hi\n{\"a\":1}");
        assert_eq!(p.message.context_id.as_deref(), Some("c1"));
        assert!(!p.blocking);
        let v10 = json!({"message": {"messageId": "m1", "role": "ROLE_USER",
            "parts": [{"text": "hi"}]}, "configuration": {"historyLength": 1}});
        let p = send_params(Version::V10, &v10).unwrap();
        assert_eq!(p.message.text, "hi");
        assert!(p.blocking);
        assert_eq!(p.history_length, Some(1));
    }

    #[test]
    fn bad_messages_are_refused_with_invalid_params_or_content_type() {
        let code = |v: Version, p: Value| send_params(v, &p).unwrap_err().code;
        let m = |parts: Value| json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": parts}});
        assert_eq!(code(Version::V10, json!({})), Code::InvalidParams);
        assert_eq!(code(Version::V10, m(json!([]))), Code::InvalidParams);
        assert_eq!(
            code(Version::V10, m(json!([{"x": 1}]))),
            Code::InvalidParams
        );
        assert_eq!(
            code(Version::V10, m(json!([{"url": "https://x/y.png"}]))),
            Code::ContentTypeNotSupported
        );
        let many: Vec<Value> = (0..=MAX_PARTS).map(|_| json!({"text": "a"})).collect();
        assert_eq!(code(Version::V10, m(json!(many))), Code::InvalidParams);
        let long = "a".repeat(MAX_TEXT_BYTES + 1);
        assert_eq!(
            code(Version::V10, m(json!([{"text": long}]))),
            Code::InvalidParams
        );
        // A 1.0 role in a 0.3 call, and an agent's message, are refused.
        assert_eq!(
            code(Version::V03, m(json!([{"kind": "text", "text": "a"}]))),
            Code::InvalidParams
        );
        let agent =
            json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "a"}]}});
        assert_eq!(code(Version::V10, agent), Code::InvalidParams);
        assert_eq!(
            task_query(&json!({})).unwrap_err().code,
            Code::InvalidParams
        );
        assert_eq!(
            task_query(&json!({"id": "x".repeat(MAX_ID_BYTES + 1)}))
                .unwrap_err()
                .code,
            Code::InvalidParams
        );
        assert_eq!(
            task_query(&json!({"id": "t", "historyLength": 2}))
                .unwrap()
                .history_length,
            Some(2)
        );
    }
}
