//! The `POST /v1/responses` request: its fields validated, and its `input` (a string or a
//! list of input items) read into neutral chat turns. Stored inputs of earlier responses are
//! read the same way when a conversation is rebuilt (see [`history`]).

use hermes_db::responses::Turn;
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::model::{CallParams, ChatMessage, Role, ToolCall};
use serde::Deserialize;
use serde_json::Value;

use crate::images;
use crate::openai::{invalid, number_in, token_count};

/// Longest conversation name.
const MAX_CONVERSATION_NAME: usize = 256;

/// The request as sent; parameters read as raw JSON so that errors name them.
#[derive(Deserialize)]
struct WireRequest {
    #[serde(default)]
    model: Option<String>,
    input: Value,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    store: Option<bool>,
    #[serde(default)]
    previous_response_id: Option<String>,
    #[serde(default)]
    conversation: Option<Value>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    temperature: Option<Value>,
    #[serde(default)]
    top_p: Option<Value>,
    #[serde(default)]
    max_output_tokens: Option<Value>,
    #[serde(default)]
    tools: Option<Value>,
}

/// A validated `POST /v1/responses` request.
#[derive(Debug)]
pub struct ResponsesRequest {
    /// The model name the caller asked for (cosmetic: echoed back).
    pub model: Option<String>,
    /// `input` as received, for the response's record.
    pub input: Value,
    /// `input` as chat turns.
    pub turns: Vec<ChatMessage>,
    /// A system message for this turn only.
    pub instructions: Option<String>,
    pub store: bool,
    /// `previous_response_id` as sent (looked up by the handler).
    pub previous: Option<String>,
    /// The named conversation to continue.
    pub conversation: Option<String>,
    pub params: CallParams,
    pub stream: bool,
}

fn unsupported(message: String) -> ApiError {
    ApiError::bad_request(ApiErrorCode::UnsupportedContentType, message)
}

/// `conversation`: a name, or `{"id": name}` as the official SDKs also send it.
fn conversation(v: Option<Value>) -> Result<Option<String>, ApiError> {
    let name = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => s,
        Some(Value::Object(mut o)) => match o.remove("id") {
            Some(Value::String(s)) => s,
            _ => return Err(invalid("conversation.id must be a string".into())),
        },
        Some(_) => {
            return Err(invalid(
                "conversation must be a name or an object with an id".into(),
            ));
        }
    };
    if name.trim().is_empty() || name.chars().count() > MAX_CONVERSATION_NAME {
        return Err(invalid(format!(
            "conversation must be 1 to {MAX_CONVERSATION_NAME} characters"
        )));
    }
    Ok(Some(name))
}

/// Parse and validate a request body.
pub fn parse(body: &[u8]) -> Result<ResponsesRequest, ApiError> {
    let wire: WireRequest = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(
            ApiErrorCode::InvalidJson,
            format!("request body is not a valid responses request: {e}"),
        )
    })?;
    // Tools are the fleet's to offer; a caller's own would silently never be called.
    if wire
        .tools
        .as_ref()
        .is_some_and(|t| !t.is_null() && t.as_array().is_none_or(|a| !a.is_empty()))
    {
        return Err(ApiError::bad_request(
            ApiErrorCode::UnsupportedParameter,
            "tools: the fleet offers its own tools; a request cannot add any",
        ));
    }
    let params = CallParams {
        temperature: number_in("temperature", wire.temperature, 0.0, 2.0)?,
        top_p: number_in("top_p", wire.top_p, 0.0, 1.0)?,
        max_tokens: token_count("max_output_tokens", wire.max_output_tokens)?,
        ..CallParams::default()
    };
    let conversation = conversation(wire.conversation)?;
    if conversation.is_some() && wire.previous_response_id.is_some() {
        return Err(invalid(
            "previous_response_id and conversation cannot be used together".into(),
        ));
    }
    let turns = turns(&wire.input)?;
    if turns.is_empty() {
        return Err(invalid("input must not be empty".into()));
    }
    Ok(ResponsesRequest {
        model: wire.model,
        input: wire.input,
        turns,
        instructions: wire.instructions.filter(|i| !i.trim().is_empty()),
        store: wire.store.unwrap_or(true),
        previous: wire.previous_response_id,
        conversation,
        params,
        stream: wire.stream.unwrap_or(false),
    })
}

/// `input` as chat turns: a string is one user message; a list holds messages, the
/// `function_call` items of an earlier answer and the `function_call_output` items of the
/// caller's own tools.
pub fn turns(input: &Value) -> Result<Vec<ChatMessage>, ApiError> {
    let items = match input {
        Value::String(s) => return Ok(vec![ChatMessage::text(Role::User, s.clone())]),
        Value::Array(items) => items,
        _ => {
            return Err(invalid(
                "input must be a string or a list of input items".into(),
            ));
        }
    };
    let mut out: Vec<ChatMessage> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => out.push(message(i, item)?),
            "function_call" => {
                let call = function_call(i, item)?;
                // Calls of one answer travel as one assistant turn, as providers expect.
                match out.last_mut() {
                    Some(last) if last.role == Role::Assistant && !last.tool_calls.is_empty() => {
                        last.tool_calls.push(call)
                    }
                    _ => out.push(ChatMessage {
                        tool_calls: vec![call],
                        content: None,
                        ..ChatMessage::text(Role::Assistant, "")
                    }),
                }
            }
            "function_call_output" => {
                let call_id = string_field(i, item, "call_id")?;
                let output = match item.get("output") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(parts)) => parts_text(i, parts)?,
                    _ => {
                        return Err(invalid(format!(
                            "input[{i}].output must be a string or a list of parts"
                        )));
                    }
                };
                out.push(ChatMessage::tool_result(call_id, output));
            }
            "input_file" | "file" => {
                return Err(unsupported(format!(
                    "input[{i}]: uploaded files are not supported; send text or images"
                )));
            }
            other => {
                return Err(invalid(format!(
                    "input[{i}]: items of type {other:?} are not supported"
                )));
            }
        }
    }
    Ok(out)
}

fn string_field(i: usize, item: &Value, name: &str) -> Result<String, ApiError> {
    item.get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or_else(|| invalid(format!("input[{i}].{name} must be a non-empty string")))
}

fn function_call(i: usize, item: &Value) -> Result<ToolCall, ApiError> {
    let arguments = string_field(i, item, "arguments")?;
    Ok(ToolCall {
        id: string_field(i, item, "call_id")?,
        name: string_field(i, item, "name")?,
        arguments: serde_json::from_str(&arguments)
            .map_err(|_| invalid(format!("input[{i}].arguments must be a JSON string")))?,
        signature: None,
    })
}

fn message(i: usize, item: &Value) -> Result<ChatMessage, ApiError> {
    let role = match item.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system" | "developer") => Role::System,
        Some(other) => {
            return Err(invalid(format!(
                "input[{i}].role {other:?} is not a message role"
            )));
        }
        None => return Err(invalid(format!("input[{i}] needs a role"))),
    };
    let mut turn = ChatMessage::text(role, "");
    match item.get("content") {
        Some(Value::String(s)) => turn.content = Some(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = Vec::new();
            for (j, part) in parts.iter().enumerate() {
                match part.get("type").and_then(Value::as_str) {
                    Some("input_text" | "output_text" | "text") => {
                        text.push(part.get("text").and_then(Value::as_str).ok_or_else(|| {
                            invalid(format!("input[{i}].content[{j}].text must be a string"))
                        })?)
                    }
                    Some("refusal") => {
                        text.extend(part.get("refusal").and_then(Value::as_str));
                    }
                    Some("input_image") if role == Role::User => {
                        let url = part.get("image_url").and_then(Value::as_str).ok_or_else(|| {
                            unsupported(format!(
                                "input[{i}].content[{j}]: an image must come as image_url (file ids are not supported)"
                            ))
                        })?;
                        turn.images.push(images::image_ref(url)?);
                    }
                    Some("input_image") => {
                        return Err(invalid(format!(
                            "input[{i}].content[{j}]: only user messages carry images"
                        )));
                    }
                    Some("input_file" | "file") => {
                        return Err(unsupported(format!(
                            "input[{i}].content[{j}]: uploaded files are not supported; send text or images"
                        )));
                    }
                    Some(other) => {
                        return Err(unsupported(format!(
                            "input[{i}].content[{j}]: parts of type {other:?} are not supported"
                        )));
                    }
                    None => {
                        return Err(invalid(format!("input[{i}].content[{j}] needs a type")));
                    }
                }
            }
            turn.content = Some(text.join("\n"));
        }
        _ => {
            return Err(invalid(format!(
                "input[{i}].content must be a string or a list of parts"
            )));
        }
    }
    Ok(turn)
}

/// The text of a tool output given as parts.
fn parts_text(i: usize, parts: &[Value]) -> Result<String, ApiError> {
    let mut text = Vec::new();
    for part in parts {
        match part.get("type").and_then(Value::as_str) {
            Some("input_text" | "output_text" | "text") => {
                text.extend(part.get("text").and_then(Value::as_str))
            }
            _ => {
                return Err(unsupported(format!(
                    "input[{i}].output: only text parts are supported"
                )));
            }
        }
    }
    Ok(text.join("\n"))
}

/// The conversation of a chain of earlier responses, oldest first: each one's input, the
/// tool round its run made, and its answer. Instructions of earlier turns are not carried
/// over (as OpenAI does); a turn without an answer (failed or still running) is left out.
/// An input stored by this build always parses; one that does not is left out too.
pub fn history(chain: &[Turn]) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    for turn in chain {
        let Some(answer) = &turn.answer else {
            continue;
        };
        let Ok(input) = turns(&turn.input) else {
            tracing::warn!(response = %turn.id.wire(), "stored input unreadable; left out of the conversation");
            continue;
        };
        out.extend(input);
        out.extend(turn.transcript.iter().cloned());
        out.push(ChatMessage::text(Role::Assistant, answer.clone()));
    }
    out
}

/// Whether the conversation has a user message with text: the router answers nothing else.
pub fn has_user_text(messages: &[ChatMessage]) -> bool {
    messages
        .iter()
        .any(|m| m.role == Role::User && m.content.as_deref().is_some_and(|c| !c.trim().is_empty()))
}

#[cfg(test)]
mod tests {
    use hermes_types::ids::ResponseId;
    use serde_json::json;

    use super::*;

    fn body(v: Value) -> Result<ResponsesRequest, ApiError> {
        parse(v.to_string().as_bytes())
    }

    #[test]
    fn a_string_input_is_one_user_turn_with_defaults() {
        let r = body(json!({"model": "hermes", "input": "hello"})).unwrap();
        assert_eq!(r.turns, vec![ChatMessage::text(Role::User, "hello")]);
        assert!(r.store && !r.stream && r.params.is_default());
        assert_eq!(r.model.as_deref(), Some("hermes"));
        assert!(r.previous.is_none() && r.conversation.is_none() && r.instructions.is_none());
    }

    #[test]
    fn items_become_turns_with_images_calls_and_outputs() {
        let r = body(json!({
            "input": [
                {"role": "developer", "content": "be brief"},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "what is this?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"},
                    {"type": "input_image", "image_url": "https://example.com/cat.jpg"}
                ]},
                {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{\"q\":1}"},
                {"type": "function_call", "call_id": "c2", "name": "lookup", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "one"},
                {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]},
                {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
            ],
            "temperature": 0.5, "top_p": 1, "max_output_tokens": 200, "store": false, "stream": true,
            "instructions": "speak French", "conversation": {"id": "proj"}
        }))
        .unwrap();
        let t = &r.turns;
        assert_eq!(t.len(), 6, "{t:?}");
        assert_eq!(
            (t[0].role, t[0].content.as_deref()),
            (Role::System, Some("be brief"))
        );
        assert_eq!(t[1].content.as_deref(), Some("what is this?"));
        assert_eq!(t[1].images.len(), 2);
        assert_eq!(t[1].images[0].mime_type.as_deref(), Some("image/png"));
        assert_eq!(t[2].role, Role::Assistant);
        assert_eq!(t[2].tool_calls.len(), 2, "two calls, one assistant turn");
        assert_eq!(t[2].tool_calls[0].arguments, json!({"q": 1}));
        assert_eq!(t[3], ChatMessage::tool_result("c1", "one"));
        assert_eq!(t[4], ChatMessage::tool_result("c2", "two"));
        assert_eq!(t[5].content.as_deref(), Some("done"));
        assert_eq!(r.params.temperature, Some(0.5));
        assert_eq!(r.params.max_tokens, Some(200));
        assert!(!r.store && r.stream);
        assert_eq!(r.conversation.as_deref(), Some("proj"));
        assert_eq!(r.instructions.as_deref(), Some("speak French"));
    }

    #[test]
    fn files_and_other_content_are_unsupported() {
        for input in [
            json!([{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]),
            json!([{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]),
            json!([{"role": "user", "content": [{"type": "input_image", "image_url": "data:application/pdf;base64,JVBE"}]}]),
            json!([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]),
            json!([{"type": "input_file", "file_id": "file-1"}]),
        ] {
            let e = body(json!({ "input": input })).unwrap_err();
            assert_eq!(
                (e.status.as_u16(), e.code),
                (400, ApiErrorCode::UnsupportedContentType),
                "{input}"
            );
        }
    }

    #[test]
    fn bad_requests_are_refused_naming_the_field() {
        for (v, code, names) in [
            (
                json!({"input": "x", "previous_response_id": "resp_1", "conversation": "c"}),
                ApiErrorCode::InvalidRequest,
                "together",
            ),
            (
                json!({"input": "x", "temperature": 3}),
                ApiErrorCode::InvalidRequest,
                "temperature",
            ),
            (
                json!({"input": "x", "top_p": -1}),
                ApiErrorCode::InvalidRequest,
                "top_p",
            ),
            (
                json!({"input": "x", "max_output_tokens": 0}),
                ApiErrorCode::InvalidRequest,
                "max_output_tokens",
            ),
            (
                json!({"input": "x", "conversation": ""}),
                ApiErrorCode::InvalidRequest,
                "conversation",
            ),
            (
                json!({"input": "x", "conversation": 5}),
                ApiErrorCode::InvalidRequest,
                "conversation",
            ),
            (json!({"input": []}), ApiErrorCode::InvalidRequest, "empty"),
            (json!({"input": 5}), ApiErrorCode::InvalidRequest, "input"),
            (
                json!({"input": [{"role": "wizard", "content": "x"}]}),
                ApiErrorCode::InvalidRequest,
                "role",
            ),
            (
                json!({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{"}]}),
                ApiErrorCode::InvalidRequest,
                "arguments",
            ),
            (
                json!({"input": [{"type": "item_reference", "id": "x"}]}),
                ApiErrorCode::InvalidRequest,
                "item_reference",
            ),
            (
                json!({"input": "x", "tools": [{"type": "function", "name": "f"}]}),
                ApiErrorCode::UnsupportedParameter,
                "tools",
            ),
            (json!({"model": "m"}), ApiErrorCode::InvalidJson, "input"),
        ] {
            let e = body(v.clone()).unwrap_err();
            assert_eq!((e.status.as_u16(), e.code), (400, code), "{v}");
            assert!(e.message.contains(names), "{v}: {}", e.message);
        }
        assert!(body(json!({"input": "x", "tools": []})).is_ok());
    }

    #[test]
    fn history_holds_inputs_tool_rounds_and_answers_without_instructions() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "current_time".into(),
            arguments: json!({}),
            signature: None,
        };
        let round = vec![
            ChatMessage {
                tool_calls: vec![call],
                content: None,
                ..ChatMessage::text(Role::Assistant, "")
            },
            ChatMessage::tool_result("call_1", "noon"),
        ];
        let routed = hermes_types::ids::SessionId::new();
        let chain = [
            Turn {
                id: ResponseId::new(),
                input: json!("what time is it?"),
                answer: Some("It is noon.".into()),
                transcript: round.clone(),
                session: Some(routed),
            },
            Turn {
                id: ResponseId::new(),
                input: json!("and now?"),
                answer: None,
                transcript: Vec::new(),
                session: Some(routed),
            },
            Turn {
                id: ResponseId::new(),
                input: json!([{"role": "user", "content": "thanks"}]),
                answer: Some("You are welcome.".into()),
                transcript: Vec::new(),
                // Not routed yet: the chain's session is still the one before.
                session: None,
            },
        ];
        assert_eq!(hermes_db::responses::session_of(&chain), Some(routed));
        let h = history(&chain);
        let mut expected = vec![ChatMessage::text(Role::User, "what time is it?")];
        expected.extend(round);
        expected.push(ChatMessage::text(Role::Assistant, "It is noon."));
        expected.push(ChatMessage::text(Role::User, "thanks"));
        expected.push(ChatMessage::text(Role::Assistant, "You are welcome."));
        assert_eq!(h, expected);
        assert!(has_user_text(&h));
        assert!(!has_user_text(&h[1..3]));
    }
}
