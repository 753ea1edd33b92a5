//! The OpenAI chat completions wire format: parsing and validating requests into our
//! neutral messages and call parameters, and rendering answers with `usage`.

use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::ids::RunId;
use hermes_types::model::{CallParams, ChatMessage, JsonSchemaFormat, Role, Usage};
use hermes_types::openai_wire::WireToolCall;
use serde::Deserialize;
use serde_json::{Value, json};

/// Most stop sequences a request may carry (OpenAI's own limit).
const MAX_STOP_SEQUENCES: usize = 4;
/// Longest `response_format.json_schema.name` (OpenAI's own limit).
const MAX_SCHEMA_NAME: usize = 64;

/// The request as sent. Parameters are read as raw JSON so that a wrong type or range gets
/// a message naming the parameter, not serde's generic one.
#[derive(Deserialize)]
struct WireRequest {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<WireMessage>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<Value>,
    #[serde(default)]
    temperature: Option<Value>,
    #[serde(default)]
    top_p: Option<Value>,
    #[serde(default)]
    stop: Option<Value>,
    #[serde(default)]
    max_tokens: Option<Value>,
    #[serde(default)]
    max_completion_tokens: Option<Value>,
    #[serde(default)]
    response_format: Option<Value>,
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
    /// The model name the caller asked for (cosmetic: echoed back in the answer).
    pub model: Option<String>,
    /// The caller's conversation in neutral form.
    pub messages: Vec<ChatMessage>,
    /// Sampling and output-shape parameters, validated.
    pub params: CallParams,
    /// Answer as server-sent events of `chat.completion.chunk` objects.
    pub stream: bool,
    /// `stream_options.include_usage`: end the stream with a chunk carrying `usage`.
    pub include_usage: bool,
}

pub(crate) fn invalid(message: String) -> ApiError {
    ApiError::bad_request(ApiErrorCode::InvalidRequest, message)
}

/// An optional number within `lo..=hi` (`null` reads as absent, as in OpenAI's API).
pub(crate) fn number_in(
    name: &str,
    v: Option<Value>,
    lo: f64,
    hi: f64,
) -> Result<Option<f32>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if (lo..=hi).contains(&x) => Ok(Some(x as f32)),
            _ => Err(invalid(format!("{name} must be between {lo} and {hi}"))),
        },
        Some(_) => Err(invalid(format!("{name} must be a number"))),
    }
}

/// An optional positive token count.
pub(crate) fn token_count(name: &str, v: Option<Value>) -> Result<Option<u32>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64().map(u32::try_from) {
            Some(Ok(x)) if x > 0 => Ok(Some(x)),
            _ => Err(invalid(format!(
                "{name} must be a positive integer of at most {}",
                u32::MAX
            ))),
        },
        Some(_) => Err(invalid(format!("{name} must be a positive integer"))),
    }
}

/// `stop`: a string or an array of up to four non-empty strings.
fn stop_sequences(v: Option<Value>) -> Result<Vec<String>, ApiError> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![Value::String(s)],
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(invalid(
                "stop must be a string or an array of strings".into(),
            ));
        }
    };
    if items.len() > MAX_STOP_SEQUENCES {
        return Err(invalid(format!(
            "stop takes at most {MAX_STOP_SEQUENCES} sequences"
        )));
    }
    items
        .into_iter()
        .map(|item| match item {
            // An empty sequence would end every answer before it starts.
            Value::String(s) if !s.is_empty() => Ok(s),
            _ => Err(invalid("stop sequences must be non-empty strings".into())),
        })
        .collect()
}

/// `response_format`: plain text (none), a named JSON schema, or any JSON object.
fn response_format(v: Option<Value>) -> Result<Option<JsonSchemaFormat>, ApiError> {
    let v = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    match v.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        // Plain JSON mode, expressed as the loosest schema so providers see one shape.
        Some("json_object") => Ok(Some(JsonSchemaFormat {
            name: "json_object".into(),
            schema: json!({"type": "object"}),
            strict: false,
        })),
        Some("json_schema") => {
            let spec = v
                .get("json_schema")
                .filter(|s| s.is_object())
                .ok_or_else(|| invalid("response_format.json_schema must be an object".into()))?;
            let name = spec.get("name").and_then(Value::as_str).unwrap_or_default();
            // Providers refuse other names; saying so now beats a failed run later.
            if name.is_empty()
                || name.len() > MAX_SCHEMA_NAME
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(invalid(format!(
                    "response_format.json_schema.name must be 1 to {MAX_SCHEMA_NAME} letters, digits, '_' or '-'"
                )));
            }
            let schema = spec
                .get("schema")
                .filter(|s| s.is_object())
                .cloned()
                .ok_or_else(|| {
                    invalid(
                        "response_format.json_schema.schema must be a JSON schema object".into(),
                    )
                })?;
            let strict = match spec.get("strict") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => {
                    return Err(invalid(
                        "response_format.json_schema.strict must be a boolean".into(),
                    ));
                }
            };
            Ok(Some(JsonSchemaFormat {
                name: name.to_string(),
                schema,
                strict,
            }))
        }
        _ => Err(invalid(
            "response_format.type must be \"text\", \"json_object\" or \"json_schema\"".into(),
        )),
    }
}

/// `stream_options.include_usage`; the options are ignored when not streaming, so a client
/// that always sends them still works.
fn include_usage(v: Option<Value>) -> Result<bool, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Object(o)) => match o.get("include_usage") {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(invalid(
                "stream_options.include_usage must be a boolean".into(),
            )),
        },
        Some(_) => Err(invalid("stream_options must be an object".into())),
    }
}

/// The call parameters of a request, validated.
fn call_params(wire: &mut WireRequest) -> Result<CallParams, ApiError> {
    // `max_completion_tokens` is OpenAI's newer name and wins when both are sent.
    let max_completion_tokens =
        token_count("max_completion_tokens", wire.max_completion_tokens.take())?;
    let max_tokens = token_count("max_tokens", wire.max_tokens.take())?;
    Ok(CallParams {
        temperature: number_in("temperature", wire.temperature.take(), 0.0, 2.0)?,
        top_p: number_in("top_p", wire.top_p.take(), 0.0, 1.0)?,
        stop: stop_sequences(wire.stop.take())?,
        max_tokens: max_completion_tokens.or(max_tokens),
        response_format: response_format(wire.response_format.take())?,
    })
}

/// Parse and validate a request body.
pub fn parse(body: &[u8]) -> Result<ChatRequest, ApiError> {
    let mut wire: WireRequest = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(
            ApiErrorCode::InvalidJson,
            format!("request body is not a valid chat completions request: {e}"),
        )
    })?;
    let params = call_params(&mut wire)?;
    let stream = wire.stream.unwrap_or(false);
    let include_usage = include_usage(wire.stream_options.take())? && stream;
    if wire.messages.is_empty() {
        return Err(ApiError::bad_request(
            ApiErrorCode::InvalidRequest,
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
                    ApiErrorCode::InvalidRequest,
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
                    ApiErrorCode::InvalidRequest,
                    format!("messages[{i}]: tool call arguments are not JSON"),
                )
            })?;
        if role == Role::Tool && m.tool_call_id.is_none() {
            return Err(ApiError::bad_request(
                ApiErrorCode::InvalidRequest,
                format!("messages[{i}]: a tool message needs tool_call_id"),
            ));
        }
        let (text, images) = crate::content::content(i, role, m.content)?;
        messages.push(ChatMessage {
            role,
            content: text,
            tool_calls,
            tool_call_id: m.tool_call_id,
            images,
        });
    }
    if !messages
        .iter()
        .any(|m| m.role == Role::User && m.content.as_deref().is_some_and(|c| !c.trim().is_empty()))
    {
        return Err(ApiError::bad_request(
            ApiErrorCode::InvalidRequest,
            "at least one user message with text is required",
        ));
    }
    Ok(ChatRequest {
        model: wire.model,
        messages,
        params,
        stream,
        include_usage,
    })
}

/// A completion's `usage`: OpenAI's token counts, and Hermes's extension (docs/api.md, chat
/// completions): what the run cost and how many tool calls it made, which the source
/// document's callers read beside the tokens. Clients that do not know them ignore them.
pub fn usage(usage: Usage, tool_calls_made: usize) -> Value {
    json!({
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total(),
        "cost_usd": usage.cost_usd(),
        "tool_calls_made": tool_calls_made,
    })
}

/// The chat completion response body.
pub fn completion(run: RunId, model: &str, text: &str, finish_reason: &str, usage: Value) -> Value {
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
        "usage": usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_parts_become_the_user_turns_images() {
        let r = parse(br#"{"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"https://cdn.example/cat.png","detail":"high"}},{"type":"image_url","image_url":"data:image/gif;base64,R0lGODlhAQABAAAAACw="}]}]}"#).unwrap();
        let m = &r.messages[0];
        assert_eq!(m.content.as_deref(), Some("what is this?"));
        assert_eq!(m.images.len(), 2);
        assert_eq!(m.images[0].url, "https://cdn.example/cat.png");
        assert_eq!(m.images[1].mime_type.as_deref(), Some("image/gif"));
    }

    #[test]
    fn a_plain_request_parses() {
        let r = parse(br#"{"model":"hermes","messages":[{"role":"system","content":"be kind"},{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#).unwrap();
        assert_eq!(r.model.as_deref(), Some("hermes"));
        assert_eq!(r.messages[1].content.as_deref(), Some("hi"));
    }

    /// A one-message request with `extra` fields added.
    fn with(extra: &str) -> Result<ChatRequest, ApiError> {
        parse(format!(r#"{{"messages":[{{"role":"user","content":"hi"}}]{extra}}}"#).as_bytes())
    }

    #[test]
    fn no_parameters_mean_the_defaults() {
        let r = with("").unwrap();
        assert!(r.params.is_default());
        assert!(!r.stream && !r.include_usage);
    }

    #[test]
    fn sampling_parameters_are_taken() {
        let r = with(
            r#","temperature":0.7,"top_p":1,"stop":["END","\n\n"],"max_tokens":100,"stream":true,"stream_options":{"include_usage":true}"#,
        )
        .unwrap();
        assert_eq!(r.params.temperature, Some(0.7));
        assert_eq!(r.params.top_p, Some(1.0));
        assert_eq!(r.params.stop, ["END", "\n\n"]);
        assert_eq!(r.params.max_tokens, Some(100));
        assert!(r.params.response_format.is_none());
        assert!(r.stream && r.include_usage);
    }

    #[test]
    fn edge_values_and_nulls_are_accepted() {
        let r = with(r#","temperature":0,"top_p":0,"stop":"STOP","max_tokens":null"#).unwrap();
        assert_eq!(r.params.temperature, Some(0.0));
        assert_eq!(r.params.top_p, Some(0.0));
        assert_eq!(r.params.stop, ["STOP"]);
        assert_eq!(r.params.max_tokens, None);
        let r = with(r#","temperature":2,"stop":[],"stream":false"#).unwrap();
        assert_eq!(r.params.temperature, Some(2.0));
        assert!(r.params.stop.is_empty() && !r.stream);
    }

    #[test]
    fn max_completion_tokens_wins_over_max_tokens() {
        let r = with(r#","max_tokens":500,"max_completion_tokens":50"#).unwrap();
        assert_eq!(r.params.max_tokens, Some(50));
        let r = with(r#","max_completion_tokens":7"#).unwrap();
        assert_eq!(r.params.max_tokens, Some(7));
    }

    #[test]
    fn response_formats_map_to_a_schema_or_none() {
        let r = with(r#","response_format":{"type":"text"}"#).unwrap();
        assert!(r.params.response_format.is_none());

        let r = with(r#","response_format":{"type":"json_object"}"#).unwrap();
        assert_eq!(
            r.params.response_format,
            Some(JsonSchemaFormat {
                name: "json_object".into(),
                schema: json!({"type": "object"}),
                strict: false,
            })
        );

        let r = with(
            r#","response_format":{"type":"json_schema","json_schema":{"name":"venue_list","schema":{"type":"object","properties":{"n":{"type":"integer"}}},"strict":true}}"#,
        )
        .unwrap();
        let f = r.params.response_format.unwrap();
        assert_eq!(f.name, "venue_list");
        assert_eq!(f.schema["properties"]["n"]["type"], "integer");
        assert!(f.strict);

        let r = with(
            r#","response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{}}}"#,
        )
        .unwrap();
        assert!(!r.params.response_format.unwrap().strict);
    }

    #[test]
    fn stream_options_without_streaming_are_ignored() {
        let r = with(r#","stream_options":{"include_usage":true}"#).unwrap();
        assert!(!r.stream && !r.include_usage);
        let r = with(r#","stream":true"#).unwrap();
        assert!(r.stream && !r.include_usage);
    }

    #[test]
    fn bad_parameters_are_refused_naming_the_parameter() {
        for (extra, names) in [
            (r#","temperature":2.01"#, "temperature"),
            (r#","temperature":-0.1"#, "temperature"),
            (r#","temperature":"hot""#, "temperature"),
            (r#","top_p":1.5"#, "top_p"),
            (r#","top_p":-1"#, "top_p"),
            (r#","stop":["a","b","c","d","e"]"#, "stop"),
            (r#","stop":[""]"#, "stop"),
            (r#","stop":[1]"#, "stop"),
            (r#","stop":5"#, "stop"),
            (r#","max_tokens":0"#, "max_tokens"),
            (r#","max_tokens":-5"#, "max_tokens"),
            (r#","max_tokens":1.5"#, "max_tokens"),
            (r#","max_tokens":4294967296"#, "max_tokens"),
            (r#","max_completion_tokens":0"#, "max_completion_tokens"),
            (
                r#","response_format":{"type":"xml"}"#,
                "response_format.type",
            ),
            (r#","response_format":{}"#, "response_format.type"),
            (
                r#","response_format":{"type":"json_schema"}"#,
                "json_schema",
            ),
            (
                r#","response_format":{"type":"json_schema","json_schema":{"schema":{}}}"#,
                "json_schema.name",
            ),
            (
                r#","response_format":{"type":"json_schema","json_schema":{"name":"has space","schema":{}}}"#,
                "json_schema.name",
            ),
            (
                r#","response_format":{"type":"json_schema","json_schema":{"name":"a"}}"#,
                "json_schema.schema",
            ),
            (
                r#","response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{},"strict":"yes"}}"#,
                "json_schema.strict",
            ),
            (
                r#","stream":true,"stream_options":{"include_usage":1}"#,
                "include_usage",
            ),
            (r#","stream":true,"stream_options":true"#, "stream_options"),
        ] {
            let e = with(extra).unwrap_err();
            assert_eq!(
                (e.status.as_u16(), e.code),
                (400, ApiErrorCode::InvalidRequest),
                "{extra}"
            );
            assert!(e.message.contains(names), "{extra}: {}", e.message);
        }
        // A non-boolean `stream` is not a chat completions request at all.
        assert_eq!(
            with(r#","stream":"yes""#).unwrap_err().code,
            ApiErrorCode::InvalidJson
        );
    }

    #[test]
    fn bad_requests_get_clear_errors() {
        for (body, code) in [
            (&b"{not json"[..], ApiErrorCode::InvalidJson),
            (br#"{"messages":[]}"#, ApiErrorCode::InvalidRequest),
            (
                br#"{"messages":[{"role":"wizard","content":"x"}]}"#,
                ApiErrorCode::InvalidRequest,
            ),
            (
                br#"{"messages":[{"role":"system","content":"x"}]}"#,
                ApiErrorCode::InvalidRequest,
            ),
            (
                br#"{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}"#,
                ApiErrorCode::InvalidRequest,
            ),
            (
                br#"{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"input_file","file_id":"f"}]}]}"#,
                ApiErrorCode::UnsupportedContentType,
            ),
            (
                br#"{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"file","file":{"file_id":"f"}}]}]}"#,
                ApiErrorCode::UnsupportedContentType,
            ),
            (
                br#"{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"input_audio"}]}]}"#,
                ApiErrorCode::UnsupportedContentType,
            ),
            (
                br#"{"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"data:application/pdf;base64,JVBERi0="}}]}]}"#,
                ApiErrorCode::UnsupportedContentType,
            ),
            (
                br#"{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://a.example/x.png"}}]},{"role":"user","content":"x"}]}"#,
                ApiErrorCode::InvalidRequest,
            ),
            (
                br#"{"messages":[{"role":"user","content":5}]}"#,
                ApiErrorCode::InvalidRequest,
            ),
        ] {
            let e = parse(body).unwrap_err();
            assert_eq!(e.code, code, "{}", String::from_utf8_lossy(body));
            assert_eq!(e.status, 400);
        }
    }
}
