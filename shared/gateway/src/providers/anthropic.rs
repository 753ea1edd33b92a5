//! Anthropic's native Messages API (`POST /v1/messages`): system blocks in the top-level
//! `system` array, strictly alternating `user`/`assistant` turns (consecutive same-role
//! turns merged), assistant tool calls as `tool_use` blocks and tool results as
//! `tool_result` blocks leading the next user turn, images as base64 or URL image blocks,
//! structured output through the `output_format` beta, usage with cache tokens counted as
//! input, the SSE event stream, and `{"type":"error"}` bodies or events after a 200.

use std::collections::BTreeMap;
use std::time::Duration;

use hermes_config::{BackendKind, Resolved};
use hermes_types::model::{ChatMessage, ImageRef, Role, ToolCall, Usage};
use reqwest::RequestBuilder;
use reqwest::header::HeaderValue;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{self, HttpClient};
use super::sse::SseReader;
use super::{Adapter, CallSpec, Completion, DeltaSink, ProviderError};

/// The beta that enables `output_format` (structured outputs) on the Messages API.
const STRUCTURED_OUTPUTS_BETA: &str = "structured-outputs-2025-11-13";

/// The native Anthropic backend.
pub struct Anthropic {
    http: HttpClient,
    /// The base URL without a trailing slash (it may carry a path prefix, e.g. a proxy's).
    base: String,
    key: Option<SecretString>,
    /// The `anthropic-version` header value (the API's wire-format version).
    version: String,
}

impl Anthropic {
    /// An adapter for the resolved Anthropic backend, speaking wire-format `version`
    /// (the `anthropic-version` header, e.g. `2023-06-01`).
    pub fn new(http: HttpClient, resolved: Resolved, version: String) -> Self {
        Self {
            http,
            base: resolved.base_url.as_str().trim_end_matches('/').to_string(),
            key: resolved.key,
            version,
        }
    }

    /// The headers every request carries: the key and the API version.
    fn authed(&self, req: RequestBuilder) -> RequestBuilder {
        let req = req.header("anthropic-version", self.version.as_str());
        // Built by hand and marked sensitive so the key never shows in a Debug print; a key
        // that is not a valid header value is left out (the 401 that follows names no key).
        match self
            .key
            .as_ref()
            .and_then(|k| HeaderValue::from_str(k.expose_secret()).ok())
        {
            Some(mut v) => {
                v.set_sensitive(true);
                req.header("x-api-key", v)
            }
            None => req,
        }
    }

    /// The Messages request for `call`.
    fn post(&self, call: &CallSpec<'_>, stream: bool) -> RequestBuilder {
        // `.json` sets `content-type: application/json`.
        let req = self
            .http
            .inner
            .post(format!("{}/v1/messages", self.base))
            .json(&request_body(call, stream));
        let req = if call.params.response_format.is_some() {
            req.header("anthropic-beta", STRUCTURED_OUTPUTS_BETA)
        } else {
            req
        };
        self.authed(req)
    }
}

impl Adapter for Anthropic {
    fn kind(&self) -> BackendKind {
        BackendKind::Anthropic
    }

    fn supports_tools(&self) -> bool {
        true
    }

    async fn complete(&self, call: &CallSpec<'_>) -> Result<Completion, ProviderError> {
        let req = self.post(call, false).timeout(call.timeout);
        let resp = http::send(req, call.timeout).await?;
        parse_response(&http::body(resp, call.timeout).await?)
    }

    async fn stream(
        &self,
        call: &CallSpec<'_>,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, ProviderError> {
        // No whole-request timeout on a stream: the reader bounds the first event and every
        // silence, and the chain bounds the attempt.
        let resp = http::send(self.post(call, true), call.first_token_timeout).await?;
        let mut reader = SseReader::new(resp, call.first_token_timeout, call.idle_timeout);
        let mut acc = StreamAcc::default();
        while let Some(event) = reader.next().await? {
            if acc.event(event.event.as_deref(), &event.data, sink)? {
                return acc.finish();
            }
        }
        Err(ProviderError::Interrupted(
            "the stream ended without message_stop".into(),
        ))
    }

    async fn health_check(&self) -> Result<(), ProviderError> {
        let timeout = Duration::from_secs(10);
        let req = self.http.inner.get(format!("{}/v1/models", self.base));
        http::send(self.authed(req).timeout(timeout), timeout)
            .await
            .map(|_| ())
    }
}

/// One wire turn being assembled; consecutive same-role messages land in the same turn.
struct Turn {
    role: &'static str,
    blocks: Vec<Value>,
}

/// Append `blocks` as a `role` turn, merging into the previous turn when it has the same
/// role: Anthropic refuses two consecutive turns of one role.
fn push_blocks(turns: &mut Vec<Turn>, role: &'static str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        // An empty content array is refused; a message with nothing to say is dropped.
        return;
    }
    match turns.last_mut() {
        Some(t) if t.role == role => t.blocks.extend(blocks),
        _ => turns.push(Turn { role, blocks }),
    }
}

/// Add a `tool_result` block to the user turn after the tool call, behind any results
/// already there but ahead of any text: Anthropic wants the results first in that turn.
fn push_tool_result(turns: &mut Vec<Turn>, block: Value) {
    match turns.last_mut() {
        Some(t) if t.role == "user" => {
            let at = t
                .blocks
                .iter()
                .take_while(|b| b["type"] == "tool_result")
                .count();
            t.blocks.insert(at, block);
        }
        _ => turns.push(Turn {
            role: "user",
            blocks: vec![block],
        }),
    }
}

/// A text block, or none for missing or blank text (Anthropic refuses empty text blocks).
fn text_block(content: Option<&str>) -> Option<Value> {
    content
        .filter(|t| !t.trim().is_empty())
        .map(|t| json!({ "type": "text", "text": t }))
}

/// An image block: inline base64 for a `data:` URL (Anthropic does not fetch those), a
/// URL source otherwise.
fn image_block(img: &ImageRef) -> Value {
    if let Some((media_type, data)) = parse_data_url(&img.url) {
        let media_type = media_type
            .or_else(|| img.mime_type.clone())
            .unwrap_or_else(|| sniff_image_type(data).to_string());
        return json!({
            "type": "image",
            "source": { "type": "base64", "media_type": media_type, "data": data },
        });
    }
    json!({ "type": "image", "source": { "type": "url", "url": img.url } })
}

/// The media type (if the URL names one) and base64 payload of a `data:…;base64,…` URL;
/// `None` for other URLs, including non-base64 data URLs.
fn parse_data_url(url: &str) -> Option<(Option<String>, &str)> {
    hermes_types::data_url::parse_base64(url).map(|d| (d.mime.map(str::to_owned), d.data))
}

/// The image type of a base64 payload by its magic bytes, for data URLs that name none
/// (Anthropic requires `media_type`); PNG when unrecognised.
fn sniff_image_type(data: &str) -> &'static str {
    if data.starts_with("/9j/") {
        "image/jpeg"
    } else if data.starts_with("R0lGOD") {
        "image/gif"
    } else if data.starts_with("UklGR") {
        "image/webp"
    } else {
        "image/png"
    }
}

/// A `tool_use` block for a call the assistant made earlier.
fn tool_use_block(c: &ToolCall) -> Value {
    // `input` must be an object; a call without arguments is stored as null.
    let input = if c.arguments.is_null() {
        json!({})
    } else {
        c.arguments.clone()
    };
    json!({ "type": "tool_use", "id": c.id, "name": c.name, "input": input })
}

/// The `system` blocks and the alternating turns of a conversation.
fn wire_conversation(messages: &[ChatMessage]) -> (Vec<Value>, Vec<Turn>) {
    let mut system = Vec::new();
    let mut turns: Vec<Turn> = Vec::new();
    for m in messages {
        match m.role {
            Role::System => system.extend(text_block(m.content.as_deref())),
            Role::User => {
                // Images before the text, as Anthropic recommends for vision prompts.
                let mut blocks: Vec<Value> = m.images.iter().map(image_block).collect();
                blocks.extend(text_block(m.content.as_deref()));
                push_blocks(&mut turns, "user", blocks);
            }
            Role::Assistant => {
                let mut blocks: Vec<Value> = text_block(m.content.as_deref()).into_iter().collect();
                blocks.extend(m.tool_calls.iter().map(tool_use_block));
                push_blocks(&mut turns, "assistant", blocks);
            }
            Role::Tool => match &m.tool_call_id {
                Some(id) => {
                    let mut block = json!({ "type": "tool_result", "tool_use_id": id });
                    // `content` is optional; an empty string is left out rather than sent.
                    if let Some(c) = m.content.as_deref().filter(|c| !c.is_empty()) {
                        block["content"] = json!(c);
                    }
                    push_tool_result(&mut turns, block);
                }
                // A result that names no call cannot be a tool_result; the model still
                // gets to read it as user text.
                None => push_blocks(
                    &mut turns,
                    "user",
                    text_block(m.content.as_deref()).into_iter().collect(),
                ),
            },
        }
    }
    (system, turns)
}

/// The JSON body of a Messages request.
pub fn request_body(call: &CallSpec<'_>, stream: bool) -> Value {
    let (system, turns) = wire_conversation(call.messages);
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|t| json!({ "role": t.role, "content": t.blocks }))
        .collect();
    let mut body = json!({
        "model": call.model_id,
        "max_tokens": call.max_tokens,
        "messages": messages,
    });
    if !system.is_empty() {
        body["system"] = Value::Array(system);
    }
    if !call.tools.is_empty() {
        body["tools"] = call
            .tools
            .iter()
            .map(|t| {
                json!({ "name": t.name, "description": t.description, "input_schema": t.parameters })
            })
            .collect();
    }
    let p = call.params;
    if let Some(t) = p.temperature {
        // Callers speak OpenAI's 0–2 range; Anthropic refuses anything above 1, and an
        // invalid request would not fail over, so the nearest value it takes is sent.
        body["temperature"] = json!(t.clamp(0.0, 1.0));
    }
    if let Some(t) = p.top_p {
        body["top_p"] = json!(t);
    }
    if !p.stop.is_empty() {
        body["stop_sequences"] = json!(p.stop);
    }
    if let Some(f) = &p.response_format {
        // Anthropic's structured outputs: constrained decoding against the schema, enabled
        // by the `structured-outputs-2025-11-13` beta header that `post` adds alongside.
        // Chosen over the older "force a single tool call" trick because the answer then
        // arrives as ordinary text, exactly as the OpenAI-compatible backends return it.
        // OpenAI's `name` and `strict` have no counterpart (the output is always strict).
        body["output_format"] = json!({ "type": "json_schema", "schema": f.schema });
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: WireUsage,
}

/// A content block of an answer; thinking, citations and server-tool blocks are skipped.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

/// Usage as Anthropic reports it. The cache counters may be absent or `null`.
#[derive(Deserialize, Default, Clone, Copy)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

impl WireUsage {
    /// The usage normalizer of this wire format: Anthropic's `input_tokens` excludes the
    /// prompt tokens written to or read from the cache, which were still processed, so
    /// all three are input; output is `output_tokens` (thinking included).
    fn normalize(&self) -> Usage {
        Usage {
            input_tokens: self.input_tokens.unwrap_or(0)
                + self.cache_creation_input_tokens.unwrap_or(0)
                + self.cache_read_input_tokens.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
            // Priced by the chain, which knows the logical model.
            cost_micro_usd: 0,
        }
    }

    /// Take the counters `later` reports over these: streamed counters are cumulative.
    fn update(&mut self, later: WireUsage) {
        let keep = |new: Option<u64>, old: Option<u64>| new.or(old);
        self.input_tokens = keep(later.input_tokens, self.input_tokens);
        self.cache_creation_input_tokens = keep(
            later.cache_creation_input_tokens,
            self.cache_creation_input_tokens,
        );
        self.cache_read_input_tokens =
            keep(later.cache_read_input_tokens, self.cache_read_input_tokens);
        self.output_tokens = keep(later.output_tokens, self.output_tokens);
    }
}

/// Anthropic's stop reason in the OpenAI words the rest of Hermes uses.
fn finish_reason(stop_reason: Option<&str>) -> String {
    match stop_reason {
        None | Some("end_turn" | "stop_sequence") => "stop",
        Some("max_tokens") => "length",
        Some("tool_use") => "tool_calls",
        Some("refusal") => "content_filter",
        Some(other) => other,
    }
    .to_string()
}

/// The failure a `{"type":"error"}` body delivered with a 200 means: the status Anthropic
/// documents for that error type, mapped as if it had come as that status.
fn error_body(body: &Value, text: &str) -> ProviderError {
    let status = match body.pointer("/error/type").and_then(Value::as_str) {
        Some("invalid_request_error") => 400,
        Some("authentication_error") => 401,
        Some("permission_error") => 403,
        Some("not_found_error") => 404,
        Some("request_too_large") => 413,
        Some("rate_limit_error") => 429,
        Some("api_error") => 500,
        Some("overloaded_error") => 529,
        _ => {
            return ProviderError::Malformed(format!(
                "error response: {}",
                http::error_message(text)
            ));
        }
    };
    // Every status above is a valid code; the fallback is never taken.
    let status = reqwest::StatusCode::from_u16(status).unwrap_or(reqwest::StatusCode::BAD_GATEWAY);
    http::status_error(status, None, text)
}

/// Parse a Messages response body.
pub fn parse_response(text: &str) -> Result<Completion, ProviderError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ProviderError::Malformed(format!("response is not JSON: {e}")))?;
    if value["type"] == "error" {
        return Err(error_body(&value, text));
    }
    let wire: WireMessage = serde_json::from_value(value)
        .map_err(|e| ProviderError::Malformed(format!("not a message: {e}")))?;
    let mut answer = String::new();
    let mut tool_calls = Vec::new();
    for block in wire.content {
        match block {
            WireBlock::Text { text } => answer.push_str(&text),
            WireBlock::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                id,
                name,
                arguments: input,
                signature: None,
            }),
            WireBlock::Other => {}
        }
    }
    Ok(Completion {
        text: Some(answer).filter(|t| !t.is_empty()),
        tool_calls,
        usage: wire.usage.normalize(),
        finish_reason: finish_reason(wire.stop_reason.as_deref()),
    })
}

#[derive(Deserialize)]
struct MessageStart {
    message: MessageStartBody,
}

#[derive(Deserialize)]
struct MessageStartBody {
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Deserialize)]
struct BlockStart {
    index: usize,
    content_block: StartBlock,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct BlockDelta {
    index: usize,
    delta: Delta,
}

/// A block delta; thinking, signature and citation deltas are skipped.
#[derive(Deserialize)]
#[serde(tag = "type")]
enum Delta {
    #[serde(rename = "text_delta")]
    Text { text: String },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: String },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    delta: MessageDeltaBody,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize, Default)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

/// A tool call being streamed: its id, name and the input JSON so far.
struct ToolAcc {
    id: String,
    name: String,
    json: String,
}

/// A streamed answer being assembled: text, tool calls by block index, usage, stop reason.
#[derive(Default)]
struct StreamAcc {
    text: String,
    tools: BTreeMap<usize, ToolAcc>,
    usage: WireUsage,
    stop_reason: Option<String>,
}

fn event_data<T: for<'de> Deserialize<'de>>(kind: &str, data: Value) -> Result<T, ProviderError> {
    serde_json::from_value(data)
        .map_err(|e| ProviderError::Malformed(format!("bad {kind} event: {e}")))
}

impl StreamAcc {
    /// Take one event; `true` when it was the end marker (`message_stop`).
    fn event(
        &mut self,
        name: Option<&str>,
        data: &str,
        sink: &dyn DeltaSink,
    ) -> Result<bool, ProviderError> {
        let value: Value = if data.trim().is_empty() {
            // Tolerate a bare `event:` line (e.g. a ping without data).
            json!({})
        } else {
            serde_json::from_str(data)
                .map_err(|e| ProviderError::Malformed(format!("stream event is not JSON: {e}")))?
        };
        // The data's own `type` is authoritative; the `event:` line repeats it.
        let kind = value["type"]
            .as_str()
            .map(str::to_string)
            .or_else(|| name.map(str::to_string))
            .unwrap_or_default();
        match kind.as_str() {
            "message_start" => {
                let start: MessageStart = event_data(&kind, value)?;
                self.usage.update(start.message.usage);
            }
            "content_block_start" => {
                let start: BlockStart = event_data(&kind, value)?;
                match start.content_block {
                    // A text block may start with text already in it.
                    StartBlock::Text { text } => self.push_text(&text, sink),
                    StartBlock::ToolUse { id, name } => {
                        // The start carries `input: {}`; the real input follows as
                        // partial JSON, so it is not taken from here.
                        self.tools.insert(
                            start.index,
                            ToolAcc {
                                id,
                                name,
                                json: String::new(),
                            },
                        );
                    }
                    StartBlock::Other => {}
                }
            }
            "content_block_delta" => {
                let delta: BlockDelta = event_data(&kind, value)?;
                match delta.delta {
                    Delta::Text { text } => self.push_text(&text, sink),
                    Delta::InputJson { partial_json } => {
                        let tool = self.tools.get_mut(&delta.index).ok_or_else(|| {
                            ProviderError::Malformed(format!(
                                "tool input for block {} that never started",
                                delta.index
                            ))
                        })?;
                        tool.json.push_str(&partial_json);
                    }
                    Delta::Other => {}
                }
            }
            "message_delta" => {
                let delta: MessageDelta = event_data(&kind, value)?;
                if let Some(r) = delta.delta.stop_reason {
                    self.stop_reason = Some(r);
                }
                // Cumulative counts: the latest replaces, never adds to, the earlier ones.
                if let Some(u) = delta.usage {
                    self.usage.update(u);
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let message = http::error_message(data);
                return Err(match value.pointer("/error/type").and_then(Value::as_str) {
                    Some("overloaded_error") => ProviderError::Server {
                        status: 529,
                        message,
                    },
                    _ => ProviderError::Interrupted(message),
                });
            }
            // `ping`, `content_block_stop` (blocks are assembled by index) and event types
            // Anthropic may add later, which its versioning policy says to ignore.
            _ => {}
        }
        Ok(false)
    }

    fn push_text(&mut self, text: &str, sink: &dyn DeltaSink) {
        if !text.is_empty() {
            sink.delta(text);
            self.text.push_str(text);
        }
    }

    fn finish(self) -> Result<Completion, ProviderError> {
        let tool_calls = self
            .tools
            .into_values()
            .map(|t| {
                // A tool without parameters streams no input at all.
                let arguments = if t.json.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&t.json).map_err(|e| {
                        ProviderError::Malformed(format!(
                            "tool call {} has input that is not JSON: {e}",
                            t.name
                        ))
                    })?
                };
                Ok(ToolCall {
                    id: t.id,
                    name: t.name,
                    arguments,
                    signature: None,
                })
            })
            .collect::<Result<Vec<_>, ProviderError>>()?;
        Ok(Completion {
            text: Some(self.text).filter(|t| !t.is_empty()),
            tool_calls,
            usage: self.usage.normalize(),
            finish_reason: finish_reason(self.stop_reason.as_deref()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::RejectReason;
    use crate::providers::testing::{Collect, call, resolved};
    use hermes_types::model::{CallParams, JsonSchemaFormat, ToolSpec};
    use wiremock::matchers::{body_json, header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    const MESSAGE_TEXT: &str = include_str!("../../tests/fixtures/anthropic/message_text.json");
    const MESSAGE_TOOL_USE: &str =
        include_str!("../../tests/fixtures/anthropic/message_tool_use.json");
    const STREAM_TEXT: &str = include_str!("../../tests/fixtures/anthropic/stream_text.sse");
    const STREAM_TOOL_USE: &str =
        include_str!("../../tests/fixtures/anthropic/stream_tool_use.sse");
    const ERROR_OVERLOADED_SSE: &str =
        include_str!("../../tests/fixtures/anthropic/error_overloaded.sse");
    const ERROR_OVERLOADED: &str =
        include_str!("../../tests/fixtures/anthropic/error_overloaded.json");
    const ERROR_RATE_LIMIT: &str =
        include_str!("../../tests/fixtures/anthropic/error_rate_limit.json");

    fn msg(role: Role, text: &str) -> ChatMessage {
        ChatMessage::text(role, text)
    }

    fn assistant_calls(text: Option<&str>, calls: &[(&str, &str, Value)]) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            content: text.map(str::to_string),
            tool_calls: calls
                .iter()
                .map(|(id, name, args)| ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments: args.clone(),
                    signature: None,
                })
                .collect(),
            tool_call_id: None,
            images: Vec::new(),
        }
    }

    fn weather_tool() -> ToolSpec {
        ToolSpec {
            name: "get_weather".into(),
            description: "Get the current weather in a given location".into(),
            parameters: json!({
                "type": "object",
                "properties": { "location": { "type": "string" } },
                "required": ["location"],
            }),
            toolset: "builtin".into(),
        }
    }

    fn backend(server: &MockServer, suffix: &str) -> Anthropic {
        hermes_net::install_crypto_provider();
        Anthropic::new(
            HttpClient::new().unwrap(),
            resolved(BackendKind::Anthropic, &format!("{}{suffix}", server.uri())),
            "2023-06-01".into(),
        )
    }

    fn sse(body: &str) -> ResponseTemplate {
        ResponseTemplate::new(200).set_body_raw(body.to_string(), "text/event-stream")
    }

    /// Mount `response` for any Messages POST on `server`.
    async fn answer_with(server: &MockServer, response: ResponseTemplate) {
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(response)
            .mount(server)
            .await;
    }

    #[test]
    fn system_messages_become_ordered_blocks_and_blank_ones_are_skipped() {
        let messages = vec![
            msg(Role::System, "You are Hermes."),
            msg(Role::System, "   "),
            msg(Role::User, "hi"),
            msg(Role::System, "Answer in French."),
        ];
        let params = CallParams::default();
        let body = request_body(&call("claude", &messages, &[], &params), false);
        assert_eq!(
            body["system"],
            json!([
                { "type": "text", "text": "You are Hermes." },
                { "type": "text", "text": "Answer in French." },
            ])
        );
        assert_eq!(
            body["messages"],
            json!([{ "role": "user", "content": [{ "type": "text", "text": "hi" }] }])
        );

        let plain = vec![msg(Role::User, "hi")];
        let body = request_body(&call("claude", &plain, &[], &params), false);
        assert!(body.get("system").is_none(), "{body}");
    }

    #[test]
    fn turns_alternate_with_tool_results_first_in_the_next_user_turn() {
        let messages = vec![
            msg(Role::User, "weather in Paris and Rome?"),
            msg(Role::User, "in celsius please"),
            assistant_calls(
                Some("Let me check both."),
                &[
                    ("toolu_01A", "get_weather", json!({ "location": "Paris" })),
                    ("toolu_01B", "get_weather", Value::Null),
                ],
            ),
            // A user message that slipped in between the call and its results.
            msg(Role::User, "thanks!"),
            ChatMessage::tool_result("toolu_01A", "18°C"),
            ChatMessage::tool_result("toolu_01B", "21°C"),
            msg(Role::Assistant, "Paris 18°C, Rome 21°C."),
            msg(Role::Assistant, "Anything else?"),
        ];
        let params = CallParams::default();
        let body = request_body(&call("claude", &messages, &[], &params), false);
        assert_eq!(
            body["messages"],
            json!([
                { "role": "user", "content": [
                    { "type": "text", "text": "weather in Paris and Rome?" },
                    { "type": "text", "text": "in celsius please" },
                ]},
                { "role": "assistant", "content": [
                    { "type": "text", "text": "Let me check both." },
                    { "type": "tool_use", "id": "toolu_01A", "name": "get_weather",
                      "input": { "location": "Paris" } },
                    { "type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {} },
                ]},
                { "role": "user", "content": [
                    { "type": "tool_result", "tool_use_id": "toolu_01A", "content": "18°C" },
                    { "type": "tool_result", "tool_use_id": "toolu_01B", "content": "21°C" },
                    { "type": "text", "text": "thanks!" },
                ]},
                { "role": "assistant", "content": [
                    { "type": "text", "text": "Paris 18°C, Rome 21°C." },
                    { "type": "text", "text": "Anything else?" },
                ]},
            ])
        );
    }

    #[test]
    fn images_become_base64_or_url_blocks_ahead_of_the_text() {
        let mut user = msg(Role::User, "What is in these images?");
        user.images = vec![
            ImageRef {
                url: "data:image/jpeg;base64,/9j/4AAQSkZJRg==".into(),
                mime_type: None,
            },
            ImageRef {
                url: "https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg".into(),
                mime_type: Some("image/jpeg".into()),
            },
            // A data URL naming no type: the payload's magic bytes tell it.
            ImageRef {
                url: "data:;base64,iVBORw0KGgo=".into(),
                mime_type: None,
            },
        ];
        let messages = vec![user];
        let params = CallParams::default();
        let body = request_body(&call("claude", &messages, &[], &params), false);
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                { "type": "image", "source": {
                    "type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQSkZJRg==" } },
                { "type": "image", "source": {
                    "type": "url",
                    "url": "https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg" } },
                { "type": "image", "source": {
                    "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo=" } },
                { "type": "text", "text": "What is in these images?" },
            ])
        );
    }

    #[test]
    fn tools_params_and_output_format_are_sent() {
        let messages = vec![msg(Role::User, "weather?")];
        let tools = vec![weather_tool()];
        let schema = json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"],
            "additionalProperties": false,
        });
        let params = CallParams {
            temperature: Some(0.3),
            top_p: Some(0.9),
            stop: vec!["\n\nHuman:".into(), "END".into()],
            max_tokens: Some(100),
            response_format: Some(JsonSchemaFormat {
                name: "city".into(),
                schema: schema.clone(),
                strict: true,
            }),
        };
        let mut spec = call("claude-haiku-4-5-20251001", &messages, &tools, &params);
        spec.max_tokens = 100;
        let body = request_body(&spec, true);
        assert_eq!(body["model"], "claude-haiku-4-5-20251001");
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(
            body["tools"],
            json!([{
                "name": "get_weather",
                "description": "Get the current weather in a given location",
                "input_schema": tools[0].parameters,
            }])
        );
        assert_eq!(body["temperature"].as_f64().unwrap() as f32, 0.3);
        assert_eq!(body["top_p"].as_f64().unwrap() as f32, 0.9);
        assert_eq!(body["stop_sequences"], json!(["\n\nHuman:", "END"]));
        assert_eq!(
            body["output_format"],
            json!({ "type": "json_schema", "schema": schema })
        );
        assert_eq!(body["stream"], true);
        assert!(body.get("stop").is_none() && body.get("response_format").is_none());

        // Nothing optional is sent when nothing is asked for; max_tokens always is.
        let params = CallParams {
            temperature: Some(1.7),
            ..CallParams::default()
        };
        let body = request_body(&call("claude", &messages, &[], &params), false);
        for absent in [
            "tools",
            "top_p",
            "stop_sequences",
            "output_format",
            "stream",
            "system",
        ] {
            assert!(body.get(absent).is_none(), "{absent} in {body}");
        }
        assert_eq!(body["max_tokens"], 256);
        // OpenAI's range goes to 2, Anthropic's stops at 1.
        assert_eq!(body["temperature"], 1.0);
    }

    #[test]
    fn text_answer_counts_cache_tokens_as_input() {
        let c = parse_response(MESSAGE_TEXT).unwrap();
        assert_eq!(
            c.text.as_deref(),
            Some("Hello! It's nice to meet you. How can I help you today?")
        );
        assert!(c.tool_calls.is_empty());
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 12 + 1650 + 2048,
                output_tokens: 18,
                cost_micro_usd: 0,
            }
        );
        assert_eq!(c.finish_reason, "stop");
    }

    #[test]
    fn tool_use_answer_is_parsed() {
        let c = parse_response(MESSAGE_TOOL_USE).unwrap();
        assert_eq!(
            c.text.as_deref(),
            Some("I'll check the current weather in San Francisco for you.")
        );
        assert_eq!(
            c.tool_calls,
            vec![ToolCall {
                id: "toolu_01A09q90qw90lq917835lq9".into(),
                name: "get_weather".into(),
                arguments: json!({ "location": "San Francisco, CA", "unit": "celsius" }),
                signature: None,
            }]
        );
        assert_eq!(c.usage.input_tokens, 472);
        assert_eq!(c.usage.output_tokens, 89);
        assert_eq!(c.finish_reason, "tool_calls");
    }

    #[test]
    fn stop_reasons_map_to_openai_words() {
        for (raw, want) in [
            (Some("end_turn"), "stop"),
            (Some("max_tokens"), "length"),
            (Some("tool_use"), "tool_calls"),
            (Some("stop_sequence"), "stop"),
            (Some("refusal"), "content_filter"),
            (Some("pause_turn"), "pause_turn"),
            (None, "stop"),
        ] {
            assert_eq!(finish_reason(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn error_bodies_with_a_200_are_failures() {
        assert_eq!(
            parse_response(ERROR_OVERLOADED),
            Err(ProviderError::Server {
                status: 529,
                message: "Overloaded".into()
            })
        );
        let too_long = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert!(matches!(
            parse_response(too_long),
            Err(ProviderError::Rejected {
                status: 400,
                reason: RejectReason::ContextLength,
                ..
            })
        ));
        let odd = r#"{"type":"error","error":{"type":"brand_new_error","message":"?"}}"#;
        assert!(matches!(
            parse_response(odd),
            Err(ProviderError::Malformed(_))
        ));
        assert!(matches!(
            parse_response("<html>bad gateway</html>"),
            Err(ProviderError::Malformed(_))
        ));
    }

    #[tokio::test]
    async fn complete_posts_to_the_prefixed_base_with_headers_and_body() {
        let server = MockServer::start().await;
        let messages = vec![
            msg(Role::System, "You are Hermes."),
            msg(Role::User, "Hello"),
        ];
        let params = CallParams {
            response_format: Some(JsonSchemaFormat {
                name: "greeting".into(),
                schema: json!({ "type": "object" }),
                strict: true,
            }),
            ..CallParams::default()
        };
        let spec = call("claude-haiku-4-5-20251001", &messages, &[], &params);
        Mock::given(method("POST"))
            .and(path("/anthropic/v1/messages"))
            .and(header("x-api-key", "test-key"))
            .and(header("anthropic-version", "2023-06-01"))
            .and(header("content-type", "application/json"))
            .and(header("anthropic-beta", STRUCTURED_OUTPUTS_BETA))
            .and(body_json(request_body(&spec, false)))
            .respond_with(ResponseTemplate::new(200).set_body_raw(MESSAGE_TEXT, "application/json"))
            .expect(1)
            .mount(&server)
            .await;
        // The base URL may carry a path prefix and a trailing slash.
        let c = backend(&server, "/anthropic/")
            .complete(&spec)
            .await
            .unwrap();
        assert_eq!(c.usage.output_tokens, 18);

        let sent = request_body(&spec, false);
        assert_eq!(sent["system"][0]["text"], "You are Hermes.");
        assert_eq!(sent["max_tokens"], 256);
        assert!(sent.get("stream").is_none());
    }

    #[tokio::test]
    async fn no_beta_header_without_structured_output() {
        let server = MockServer::start().await;
        answer_with(
            &server,
            ResponseTemplate::new(200).set_body_raw(MESSAGE_TOOL_USE, "application/json"),
        )
        .await;
        let messages = vec![msg(Role::User, "weather?")];
        let tools = vec![weather_tool()];
        let params = CallParams::default();
        let c = backend(&server, "")
            .complete(&call("claude", &messages, &tools, &params))
            .await
            .unwrap();
        assert_eq!(c.tool_calls[0].name, "get_weather");
        let requests = server.received_requests().await.unwrap();
        assert_eq!(requests.len(), 1);
        assert!(requests[0].headers.get("anthropic-beta").is_none());
        assert_eq!(requests[0].headers["x-api-key"], "test-key");
    }

    #[tokio::test]
    async fn streamed_text_reaches_the_sink_and_usage_is_not_summed() {
        let server = MockServer::start().await;
        answer_with(&server, sse(STREAM_TEXT)).await;
        let messages = vec![msg(Role::User, "Hello")];
        let params = CallParams::default();
        let sink = Collect::default();
        let c = backend(&server, "")
            .stream(&call("claude", &messages, &[], &params), &sink)
            .await
            .unwrap();
        assert_eq!(
            *sink.0.lock().unwrap(),
            vec!["Hello", "! How", " can I help", " you today?"]
        );
        assert_eq!(c.text.as_deref(), Some("Hello! How can I help you today?"));
        assert_eq!(c.finish_reason, "stop");
        // message_start says 1 output token and message_delta 15: cumulative, so 15.
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 25,
                output_tokens: 15,
                cost_micro_usd: 0,
            }
        );
        let sent = &server.received_requests().await.unwrap()[0];
        let body: Value = serde_json::from_slice(&sent.body).unwrap();
        assert_eq!(body["stream"], true);
    }

    #[tokio::test]
    async fn streamed_tool_input_is_assembled_from_partial_json() {
        let server = MockServer::start().await;
        answer_with(&server, sse(STREAM_TOOL_USE)).await;
        let messages = vec![msg(Role::User, "weather in SF?")];
        let tools = vec![weather_tool()];
        let params = CallParams::default();
        let sink = Collect::default();
        let c = backend(&server, "")
            .stream(&call("claude", &messages, &tools, &params), &sink)
            .await
            .unwrap();
        assert_eq!(
            sink.joined(),
            "Okay, let's check the weather for San Francisco, CA:"
        );
        assert_eq!(c.text.as_deref(), Some(sink.joined().as_str()));
        assert_eq!(
            c.tool_calls,
            vec![ToolCall {
                id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                name: "get_weather".into(),
                arguments: json!({ "location": "San Francisco, CA", "unit": "fahrenheit" }),
                signature: None,
            }]
        );
        assert_eq!(c.finish_reason, "tool_calls");
        // Cache reads from message_start count as input.
        assert_eq!(c.usage.input_tokens, 472 + 1536);
        assert_eq!(c.usage.output_tokens, 89);
    }

    #[test]
    fn cumulative_output_tokens_take_the_last_report() {
        let sink = Collect::default();
        let mut acc = StreamAcc::default();
        for (name, data) in [
            (
                "message_start",
                r#"{"type":"message_start","message":{"id":"msg_01","usage":{"input_tokens":10,"cache_read_input_tokens":null,"output_tokens":1}}}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":40}}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":64}}"#,
            ),
        ] {
            assert!(!acc.event(Some(name), data, &sink).unwrap());
        }
        assert!(
            acc.event(Some("message_stop"), r#"{"type":"message_stop"}"#, &sink)
                .unwrap()
        );
        let c = acc.finish().unwrap();
        assert_eq!(c.usage.input_tokens, 10);
        assert_eq!(c.usage.output_tokens, 64);
        assert_eq!(c.finish_reason, "length");
        assert_eq!(c.text, None);
    }

    #[tokio::test]
    async fn error_event_after_a_200_fails_the_stream() {
        let server = MockServer::start().await;
        answer_with(&server, sse(ERROR_OVERLOADED_SSE)).await;
        let messages = vec![msg(Role::User, "Hello")];
        let params = CallParams::default();
        let sink = Collect::default();
        let err = backend(&server, "")
            .stream(&call("claude", &messages, &[], &params), &sink)
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ProviderError::Server {
                status: 529,
                message: "Overloaded".into()
            }
        );
        assert!(err.fails_over());
        assert_eq!(sink.joined(), "Sure, here");

        // Any other error event breaks the stream off.
        let mut acc = StreamAcc::default();
        let err = acc
            .event(
                Some("error"),
                r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
                &sink,
            )
            .unwrap_err();
        assert_eq!(
            err,
            ProviderError::Interrupted("Internal server error".into())
        );
    }

    #[tokio::test]
    async fn stream_without_message_stop_is_interrupted() {
        let server = MockServer::start().await;
        let cut = STREAM_TEXT.split("event: message_stop").next().unwrap();
        answer_with(&server, sse(cut)).await;
        let messages = vec![msg(Role::User, "Hello")];
        let params = CallParams::default();
        let sink = Collect::default();
        let err = backend(&server, "")
            .stream(&call("claude", &messages, &[], &params), &sink)
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::Interrupted(_)), "{err:?}");
        assert_eq!(sink.joined(), "Hello! How can I help you today?");
    }

    #[tokio::test]
    async fn a_chunk_that_is_not_json_is_malformed() {
        let server = MockServer::start().await;
        let start = STREAM_TEXT
            .split("event: content_block_start")
            .next()
            .unwrap();
        let body = format!(
            "{start}event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_de\n\n"
        );
        answer_with(&server, sse(&body)).await;
        let messages = vec![msg(Role::User, "Hello")];
        let params = CallParams::default();
        let err = backend(&server, "")
            .stream(
                &call("claude", &messages, &[], &params),
                &Collect::default(),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::Malformed(_)), "{err:?}");
    }

    #[tokio::test]
    async fn rate_limit_carries_retry_after() {
        let server = MockServer::start().await;
        answer_with(
            &server,
            ResponseTemplate::new(429)
                .insert_header("retry-after", "7")
                .insert_header("anthropic-ratelimit-input-tokens-remaining", "0")
                .set_body_raw(ERROR_RATE_LIMIT, "application/json"),
        )
        .await;
        let messages = vec![msg(Role::User, "Hello")];
        let params = CallParams::default();
        let b = backend(&server, "");
        let spec = call("claude", &messages, &[], &params);
        let want = ProviderError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
        };
        assert_eq!(b.complete(&spec).await.unwrap_err(), want);
        assert_eq!(
            b.stream(&spec, &Collect::default()).await.unwrap_err(),
            want
        );
    }

    #[tokio::test]
    async fn overloaded_529_is_a_server_error_that_fails_over() {
        let server = MockServer::start().await;
        answer_with(
            &server,
            ResponseTemplate::new(529).set_body_raw(ERROR_OVERLOADED, "application/json"),
        )
        .await;
        let messages = vec![msg(Role::User, "Hello")];
        let params = CallParams::default();
        let err = backend(&server, "")
            .complete(&call("claude", &messages, &[], &params))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ProviderError::Server {
                status: 529,
                message: "Overloaded".into()
            }
        );
        assert!(err.fails_over());
    }

    #[tokio::test]
    async fn health_check_lists_models_with_the_key() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .and(path("/v1/models"))
            .and(header("x-api-key", "test-key"))
            .and(header("anthropic-version", "2023-06-01"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "data": [{
                    "type": "model",
                    "id": "claude-haiku-4-5-20251001",
                    "display_name": "Claude Haiku 4.5",
                    "created_at": "2025-10-15T00:00:00Z"
                }],
                "has_more": false,
                "first_id": "claude-haiku-4-5-20251001",
                "last_id": "claude-haiku-4-5-20251001"
            })))
            .expect(1)
            .mount(&server)
            .await;
        backend(&server, "/").health_check().await.unwrap();
    }

    #[tokio::test]
    async fn a_refused_key_fails_without_showing_it() {
        let server = MockServer::start().await;
        let refusal = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011CSHr1nUaCkzWQNdTbNgQ2"}"#;
        Mock::given(method("GET"))
            .and(path("/v1/models"))
            .respond_with(ResponseTemplate::new(401).set_body_raw(refusal, "application/json"))
            .mount(&server)
            .await;
        let err = backend(&server, "").health_check().await.unwrap_err();
        assert!(matches!(
            err,
            ProviderError::Rejected {
                status: 401,
                reason: RejectReason::Unauthorized,
                ..
            }
        ));
        assert!(!format!("{err} {err:?}").contains("test-key"));
    }
}
