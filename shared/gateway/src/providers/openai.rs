//! OpenAI-compatible chat completions (OpenAI, OpenRouter, the Hermes gateway, Ollama, any
//! endpoint speaking `/chat/completions`): tools with arguments as a JSON string, streamed
//! tool calls assembled by index, `stream_options.include_usage`, `choices: null` on the
//! usage chunk tolerated, `response_format` json_schema. Ollama takes no tools.

use std::collections::BTreeMap;

use hermes_config::{BackendKind, Resolved};
use hermes_types::model::{ChatMessage, Role, ToolCall, Usage};
use hermes_types::openai_wire::{WireToolCall, encode_tool_call};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::http::{self, HttpClient};
use super::sse::SseReader;
use super::{Adapter, CallSpec, Completion, DeltaSink, ProviderError};

/// An OpenAI-compatible backend.
pub struct OpenAi {
    http: HttpClient,
    kind: BackendKind,
    base: String,
    key: Option<SecretString>,
}

impl OpenAi {
    pub fn new(http: HttpClient, resolved: Resolved) -> Self {
        Self {
            http,
            kind: resolved.kind,
            base: resolved.base_url.as_str().trim_end_matches('/').to_string(),
            key: resolved.key,
        }
    }

    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        let req = self
            .http
            .inner
            .post(format!("{}/chat/completions", self.base))
            .json(body);
        match &self.key {
            Some(k) => req.bearer_auth(k.expose_secret()),
            None => req,
        }
    }
}

impl Adapter for OpenAi {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    fn supports_tools(&self) -> bool {
        self.kind.supports_tools()
    }

    async fn complete(&self, call: &CallSpec<'_>) -> Result<Completion, ProviderError> {
        let body = request_body(call, false);
        let resp = http::send(self.post(&body).timeout(call.timeout), call.timeout).await?;
        parse_response(&http::body(resp, call.timeout).await?)
    }

    async fn stream(
        &self,
        call: &CallSpec<'_>,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, ProviderError> {
        let body = request_body(call, true);
        // No whole-request timeout on a stream: the reader bounds the first event and every
        // silence, and the chain bounds the attempt.
        let resp = http::send(self.post(&body), call.first_token_timeout).await?;
        let mut reader = SseReader::new(resp, call.first_token_timeout, call.idle_timeout);
        let mut acc = StreamAcc::default();
        while let Some(event) = reader.next().await? {
            if event.data.trim() == "[DONE]" {
                return acc.finish();
            }
            acc.chunk(&event.data, sink)?;
        }
        // Some compatible servers close without `[DONE]`; an answer whose finish reason
        // and usage both arrived is whole. Anything less was cut off.
        if acc.finish_reason.is_some() && acc.saw_usage {
            tracing::debug!(backend = %self.kind, "stream ended without [DONE] after its usage chunk");
            return acc.finish();
        }
        Err(ProviderError::Interrupted(
            "the stream ended before its finish reason and usage ([DONE] missing)".into(),
        ))
    }

    async fn health_check(&self) -> Result<(), ProviderError> {
        let timeout = std::time::Duration::from_secs(10);
        let req = self.http.inner.get(format!("{}/models", self.base));
        let req = match &self.key {
            Some(k) => req.bearer_auth(k.expose_secret()),
            None => req,
        };
        http::send(req.timeout(timeout), timeout).await.map(|_| ())
    }
}

fn role(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn wire_message(m: &ChatMessage) -> Value {
    let mut v = json!({ "role": role(m.role), "content": m.content });
    if !m.images.is_empty() {
        // Images go as content parts: the text first, then one image_url part per image.
        let mut parts: Vec<Value> = m
            .content
            .iter()
            .map(|t| json!({ "type": "text", "text": t }))
            .collect();
        parts.extend(
            m.images
                .iter()
                .map(|i| json!({ "type": "image_url", "image_url": { "url": i.url } })),
        );
        v["content"] = Value::Array(parts);
    }
    if !m.tool_calls.is_empty() {
        v["tool_calls"] = m.tool_calls.iter().map(encode_tool_call).collect();
    }
    if let Some(id) = &m.tool_call_id {
        v["tool_call_id"] = json!(id);
    }
    v
}

/// The JSON body of a chat completions request. Stacked system blocks stay separate
/// `system` messages, in order.
pub fn request_body(call: &CallSpec<'_>, stream: bool) -> Value {
    let mut body = json!({
        "model": call.model_id,
        "messages": call.messages.iter().map(wire_message).collect::<Vec<_>>(),
        "max_tokens": call.max_tokens,
    });
    if !call.tools.is_empty() {
        body["tools"] = call
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": { "name": t.name, "description": t.description, "parameters": t.parameters }
                })
            })
            .collect();
    }
    let p = call.params;
    if let Some(t) = p.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(t) = p.top_p {
        body["top_p"] = json!(t);
    }
    if !p.stop.is_empty() {
        body["stop"] = json!(p.stop);
    }
    if let Some(f) = &p.response_format {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": { "name": f.name, "schema": f.schema, "strict": f.strict },
        });
    }
    if stream {
        body["stream"] = json!(true);
        body["stream_options"] = json!({ "include_usage": true });
    }
    body
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl WireUsage {
    /// The usage normalizer of this wire format: prompt → input, completion (which
    /// already includes reasoning tokens) → output.
    fn normalize(&self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.completion_tokens,
            // Priced by the chain, which knows the logical model.
            cost_micro_usd: 0,
        }
    }
}

fn tool_call(c: WireToolCall) -> Result<ToolCall, ProviderError> {
    let name = c.function.name.clone();
    c.into_tool_call().map_err(|e| {
        ProviderError::Malformed(format!(
            "tool call {name} has arguments that are not JSON: {e}"
        ))
    })
}

/// Parse a chat completions response body.
pub fn parse_response(text: &str) -> Result<Completion, ProviderError> {
    let wire: WireResponse = serde_json::from_str(text)
        .map_err(|e| ProviderError::Malformed(format!("not a chat completion: {e}")))?;
    let choice = wire
        .choices
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| ProviderError::Malformed("no choices in the response".into()))?;
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(tool_call)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Completion {
        text: choice.message.content.filter(|t| !t.is_empty()),
        tool_calls,
        usage: wire.usage.unwrap_or_default().normalize(),
        finish_reason: choice.finish_reason.unwrap_or_else(|| "stop".into()),
    })
}

#[derive(Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Option<Vec<WireChunkChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChunkChoice {
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolDelta>>,
}

#[derive(Deserialize)]
struct WireToolDelta {
    #[serde(default)]
    index: usize,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunctionDelta>,
}

#[derive(Deserialize)]
struct WireFunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

/// A streamed answer being assembled: text, tool calls by index, usage, finish reason.
#[derive(Default)]
struct StreamAcc {
    text: String,
    calls: BTreeMap<usize, (String, String, String)>,
    usage: Usage,
    saw_usage: bool,
    finish_reason: Option<String>,
}

impl StreamAcc {
    fn chunk(&mut self, data: &str, sink: &dyn DeltaSink) -> Result<(), ProviderError> {
        let chunk: WireChunk = serde_json::from_str(data)
            .map_err(|e| ProviderError::Malformed(format!("stream chunk is not JSON: {e}")))?;
        if let Some(u) = chunk.usage {
            self.usage = u.normalize();
            self.saw_usage = true;
        }
        // The usage chunk carries `choices: []` or, on some gateways, `choices: null`.
        for choice in chunk.choices.into_iter().flatten() {
            if let Some(delta) = choice.delta {
                if let Some(t) = delta.content.filter(|t| !t.is_empty()) {
                    sink.delta(&t);
                    self.text.push_str(&t);
                }
                for d in delta.tool_calls.into_iter().flatten() {
                    let entry = self.calls.entry(d.index).or_default();
                    if let Some(id) = d.id {
                        entry.0 = id;
                    }
                    if let Some(f) = d.function {
                        if let Some(n) = f.name {
                            entry.1.push_str(&n);
                        }
                        if let Some(a) = f.arguments {
                            entry.2.push_str(&a);
                        }
                    }
                }
            }
            if let Some(r) = choice.finish_reason {
                self.finish_reason = Some(r);
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<Completion, ProviderError> {
        let tool_calls = self
            .calls
            .into_values()
            .map(|(id, name, arguments)| {
                tool_call(WireToolCall {
                    id,
                    function: hermes_types::openai_wire::WireFunction { name, arguments },
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Completion {
            text: Some(self.text).filter(|t| !t.is_empty()),
            tool_calls,
            usage: self.usage,
            finish_reason: self.finish_reason.unwrap_or_else(|| "stop".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::testing::call;
    use hermes_types::model::{CallParams, ToolSpec};

    #[test]
    fn tool_calls_and_usage_are_parsed() {
        let body = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"call_1","type":"function","function":{"name":"current_time","arguments":"{\"timezone\":\"Asia/Tokyo\"}"}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#;
        let c = parse_response(body).unwrap();
        assert_eq!(c.text, None);
        assert_eq!(c.tool_calls[0].name, "current_time");
        assert_eq!(c.tool_calls[0].arguments["timezone"], "Asia/Tokyo");
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 12,
                output_tokens: 7,
                cost_micro_usd: 0,
            }
        );
        assert_eq!(c.finish_reason, "tool_calls");
    }

    #[test]
    fn null_choices_and_bad_arguments_are_malformed() {
        assert!(matches!(
            parse_response(r#"{"choices":null}"#),
            Err(ProviderError::Malformed(_))
        ));
        let bad = r#"{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"t","arguments":"{nope"}}]}}]}"#;
        assert!(matches!(
            parse_response(bad),
            Err(ProviderError::Malformed(_))
        ));
    }

    #[test]
    fn request_carries_tools_and_tool_results() {
        let messages = vec![
            ChatMessage::text(Role::User, "time?"),
            ChatMessage {
                role: Role::Assistant,
                content: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "current_time".into(),
                    arguments: json!({}),
                    signature: None,
                }],
                tool_call_id: None,
                images: Vec::new(),
            },
            ChatMessage::tool_result("c1", "12:00"),
        ];
        let tools = vec![ToolSpec {
            name: "current_time".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}),
            toolset: "builtin".into(),
        }];
        let params = CallParams::default();
        let mut spec = call("gpt", &messages, &tools, &params);
        spec.max_tokens = 5;
        let body = request_body(&spec, false);
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(body["messages"][2]["tool_call_id"], "c1");
        assert_eq!(body["tools"][0]["function"]["name"], "current_time");
        assert_eq!(body["max_tokens"], 5);
    }

    fn replay(transcript: &str, sink: &dyn DeltaSink) -> Result<Completion, ProviderError> {
        let mut acc = StreamAcc::default();
        for block in transcript.split("\n\n") {
            let Some(data) = block.trim().strip_prefix("data: ") else {
                continue;
            };
            if data == "[DONE]" {
                return acc.finish();
            }
            acc.chunk(data, sink)?;
        }
        Err(ProviderError::Interrupted("no [DONE]".into()))
    }

    #[test]
    fn recorded_completion_normalizes_usage() {
        let c = parse_response(include_str!(
            "../../tests/fixtures/openai/chat_completion.json"
        ))
        .unwrap();
        assert_eq!(
            c.text.as_deref(),
            Some("Hello! How can I assist you today?")
        );
        assert_eq!(c.usage.input_tokens, 19);
        assert_eq!(c.usage.output_tokens, 10);
        assert_eq!(c.finish_reason, "stop");
    }

    #[test]
    fn recorded_stream_assembles_text_and_usage() {
        let sink = crate::providers::testing::Collect::default();
        let c = replay(
            include_str!("../../tests/fixtures/openai/stream_text.sse"),
            &sink,
        )
        .unwrap();
        assert_eq!(sink.joined(), "Hello there!");
        assert_eq!(
            sink.0.lock().unwrap().len(),
            3,
            "the empty role chunk is not a delta"
        );
        assert_eq!(c.text.as_deref(), Some("Hello there!"));
        assert_eq!((c.usage.input_tokens, c.usage.output_tokens), (21, 3));
    }

    #[test]
    fn recorded_stream_assembles_tool_calls_by_index_and_tolerates_null_choices() {
        let sink = crate::providers::testing::Collect::default();
        let c = replay(
            include_str!("../../tests/fixtures/openai/stream_tool_calls.sse"),
            &sink,
        )
        .unwrap();
        assert_eq!(sink.joined(), "");
        assert_eq!(c.text, None);
        assert_eq!(c.finish_reason, "tool_calls");
        assert_eq!(c.tool_calls.len(), 2);
        assert_eq!(c.tool_calls[0].id, "call_DdmO9pD3xa9XTPNJ32zg2hcA");
        assert_eq!(c.tool_calls[0].arguments, json!({"timezone": "Asia/Tokyo"}));
        assert_eq!(c.tool_calls[1].name, "http_fetch");
        assert_eq!(c.tool_calls[1].arguments["url"], "https://example.com");
        assert_eq!((c.usage.input_tokens, c.usage.output_tokens), (85, 44));
    }

    #[test]
    fn params_response_format_and_stream_options_reach_the_body() {
        let messages = vec![
            ChatMessage::text(Role::System, "persona"),
            ChatMessage::text(Role::System, "memory"),
            ChatMessage::text(Role::User, "hi"),
        ];
        let params = CallParams {
            temperature: Some(0.2),
            top_p: Some(0.9),
            stop: vec!["END".into()],
            max_tokens: None,
            response_format: Some(hermes_types::model::JsonSchemaFormat {
                name: "answer".into(),
                schema: json!({"type": "object"}),
                strict: true,
            }),
        };
        let body = request_body(&call("m", &messages, &[], &params), true);
        assert_eq!(body["messages"][0]["content"], "persona");
        assert_eq!(body["messages"][1]["role"], "system");
        assert_eq!(body["messages"][1]["content"], "memory");
        assert_eq!(body["temperature"], json!(0.2f32));
        assert_eq!(body["top_p"], json!(0.9f32));
        assert_eq!(body["stop"], json!(["END"]));
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(body["response_format"]["json_schema"]["name"], "answer");
        assert_eq!(body["response_format"]["json_schema"]["strict"], true);
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert!(body.get("tools").is_none(), "no tool fields without tools");
    }
}
