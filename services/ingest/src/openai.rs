//! The OpenAI chat completions wire format: parsing and validating requests into our
//! neutral messages, and rendering answers with `usage`.

use hermes_shared::http::ApiError;
use hermes_shared::ids::RunId;
use hermes_shared::model::{ChatMessage, Role, Usage};
use hermes_shared::openai_wire::WireToolCall;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
struct WireRequest {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<WireMessage>,
    #[serde(default)]
    stream: Option<bool>,
}

#[derive(Deserialize)]
struct WireMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
    #[serde(default)]
    tool_call_id: Option<String>,
}

/// A validated chat completions request.
#[derive(Debug)]
pub struct ChatRequest {
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
}

fn content_text(i: usize, content: Option<Value>) -> Result<Option<String>, ApiError> {
    match content {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = part.get("text").and_then(Value::as_str) {
                            if !text.is_empty() {
                                text.push('\n');
                            }
                            text.push_str(t);
                        }
                    }
                    Some(other) => {
                        return Err(ApiError::bad_request(
                            "unsupported_content_type",
                            format!(
                                "messages[{i}]: content parts of type {other:?} are not supported yet"
                            ),
                        ));
                    }
                    None => {
                        return Err(ApiError::bad_request(
                            "invalid_request",
                            format!("messages[{i}]: every content part needs a type"),
                        ));
                    }
                }
            }
            Ok(Some(text))
        }
        Some(_) => Err(ApiError::bad_request(
            "invalid_request",
            format!("messages[{i}].content must be a string or an array of parts"),
        )),
    }
}

/// Parse and validate a request body.
pub fn parse(body: &[u8]) -> Result<ChatRequest, ApiError> {
    let wire: WireRequest = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(
            "invalid_json",
            format!("request body is not a valid chat completions request: {e}"),
        )
    })?;
    if wire.stream == Some(true) {
        return Err(ApiError::bad_request(
            "unsupported",
            "streaming is not supported yet; send \"stream\": false",
        ));
    }
    if wire.messages.is_empty() {
        return Err(ApiError::bad_request(
            "invalid_request",
            "messages must not be empty",
        ));
    }
    let mut messages = Vec::with_capacity(wire.messages.len());
    for (i, m) in wire.messages.into_iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    format!("messages[{i}].role {other:?} is not a chat role"),
                ));
            }
        };
        let tool_calls = m
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(WireToolCall::into_tool_call)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| {
                ApiError::bad_request(
                    "invalid_request",
                    format!("messages[{i}]: tool call arguments are not JSON"),
                )
            })?;
        if role == Role::Tool && m.tool_call_id.is_none() {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!("messages[{i}]: a tool message needs tool_call_id"),
            ));
        }
        messages.push(ChatMessage {
            role,
            content: content_text(i, m.content)?,
            tool_calls,
            tool_call_id: m.tool_call_id,
            images: Vec::new(),
        });
    }
    if !messages
        .iter()
        .any(|m| m.role == Role::User && m.content.as_deref().is_some_and(|c| !c.trim().is_empty()))
    {
        return Err(ApiError::bad_request(
            "invalid_request",
            "at least one user message with text is required",
        ));
    }
    Ok(ChatRequest {
        model: wire.model,
        messages,
    })
}

/// The chat completion response body.
pub fn completion(run: RunId, model: &str, text: &str, finish_reason: &str, usage: Usage) -> Value {
    json!({
        "id": format!("chatcmpl-{run}"),
        "object": "chat.completion",
        "created": chrono::Utc::now().timestamp(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": text },
            "finish_reason": finish_reason,
        }],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_request_parses() {
        let r = parse(br#"{"model":"hermes","messages":[{"role":"system","content":"be kind"},{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#).unwrap();
        assert_eq!(r.model.as_deref(), Some("hermes"));
        assert_eq!(r.messages[1].content.as_deref(), Some("hi"));
    }

    #[test]
    fn bad_requests_get_clear_errors() {
        for (body, code) in [
            (&b"{not json"[..], "invalid_json"),
            (br#"{"messages":[]}"#, "invalid_request"),
            (
                br#"{"messages":[{"role":"wizard","content":"x"}]}"#,
                "invalid_request",
            ),
            (
                br#"{"messages":[{"role":"system","content":"x"}]}"#,
                "invalid_request",
            ),
            (
                br#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
                "unsupported_content_type",
            ),
            (
                br#"{"messages":[{"role":"user","content":"x"}],"stream":true}"#,
                "unsupported",
            ),
            (
                br#"{"messages":[{"role":"user","content":5}]}"#,
                "invalid_request",
            ),
        ] {
            let e = parse(body).unwrap_err();
            assert_eq!(e.code, code, "{}", String::from_utf8_lossy(body));
            assert_eq!(e.status, 400);
        }
    }
}
