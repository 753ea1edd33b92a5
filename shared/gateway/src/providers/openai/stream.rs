//! A streamed OpenAI-compatible answer assembled chunk by chunk: text deltas to the sink,
//! tool calls by index, the usage of the last chunk, `choices: null` tolerated.

use std::collections::BTreeMap;

use hermes_types::model::Usage;
use hermes_types::openai_wire::WireToolCall;
use serde::Deserialize;

use super::presets::{ChunkUsage, Quirks};
use super::response::{WireUsage, tool_call};
use crate::providers::{Completion, DeltaSink, ProviderError};
use hermes_types::model::FinishReason;

#[derive(Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Option<Vec<WireChunkChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// Groq's own block, whose `usage` the finishing chunk carries.
    #[serde(default)]
    x_groq: Option<WireXGroq>,
}

#[derive(Deserialize)]
struct WireXGroq {
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
pub(super) struct StreamAcc {
    quirks: Quirks,
    text: String,
    calls: BTreeMap<usize, (String, String, String)>,
    usage: Usage,
    pub(super) saw_usage: bool,
    pub(super) finish_reason: Option<String>,
}

impl StreamAcc {
    /// An empty answer of a backend with these quirks.
    pub(super) fn new(quirks: Quirks) -> Self {
        Self {
            quirks,
            ..Self::default()
        }
    }

    pub(super) fn chunk(&mut self, data: &str, sink: &dyn DeltaSink) -> Result<(), ProviderError> {
        let chunk: WireChunk = serde_json::from_str(data)
            .map_err(|e| ProviderError::Malformed(format!("stream chunk is not JSON: {e}")))?;
        let groq = match self.quirks.chunk_usage {
            ChunkUsage::AlsoXGroq => chunk.x_groq.and_then(|x| x.usage),
            ChunkUsage::TopLevel => None,
        };
        if let Some(u) = chunk.usage.or(groq) {
            self.usage = u.normalize(self.quirks.reasoning);
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

    pub(super) fn finish(self) -> Result<Completion, ProviderError> {
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
            finish_reason: self
                .finish_reason
                .map_or(FinishReason::Stop, FinishReason::from),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::providers::{Completion, DeltaSink, ProviderError};

    use serde_json::json;

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
    fn recorded_stream_assembles_text_and_usage() {
        let sink = crate::providers::testing::Collect::default();
        let c = replay(
            include_str!("../../../tests/fixtures/openai/stream_text.sse"),
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
            include_str!("../../../tests/fixtures/openai/stream_tool_calls.sse"),
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
}
