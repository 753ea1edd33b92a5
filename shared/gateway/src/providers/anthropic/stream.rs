//! The Anthropic SSE event stream assembled into a [`Completion`]: text deltas to the sink,
//! tool input from partial JSON, usage from `message_start` and the last `message_delta`.

use std::collections::BTreeMap;

use hermes_types::model::ToolCall;
use serde::Deserialize;
use serde_json::{Value, json};

use super::response::{WireUsage, finish_reason};
use crate::providers::http;
use crate::providers::{Completion, DeltaSink, ProviderError};

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
pub(super) struct StreamAcc {
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
    pub(super) fn event(
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

    pub(super) fn finish(self) -> Result<Completion, ProviderError> {
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
    use crate::providers::anthropic::test_support::*;
    use crate::providers::testing::{Collect, call};
    use crate::providers::{Adapter, ProviderError};
    use hermes_types::model::CallParams;
    use hermes_types::model::{Role, ToolCall, Usage};
    use serde_json::{Value, json};
    use wiremock::MockServer;

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
}
