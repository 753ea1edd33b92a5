//! An OpenAI-compatible answer read back into a [`Completion`]: the wire types, tool calls
//! with their JSON-string arguments decoded, and the usage normalizer.

use hermes_types::model::{ToolCall, Usage};
use hermes_types::openai_wire::WireToolCall;
use serde::Deserialize;

use super::presets::{Quirks, ReasoningTokens};
use crate::providers::{Completion, ProviderError};
use hermes_types::model::FinishReason;

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
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    completion_tokens_details: Option<WireCompletionDetails>,
}

#[derive(Deserialize, Default)]
struct WireCompletionDetails {
    #[serde(default)]
    reasoning_tokens: u64,
}

impl WireUsage {
    /// The usage normalizer of this wire format: prompt → input, completion → output, with
    /// the reasoning tokens added where the backend counts them apart.
    pub(super) fn normalize(&self, reasoning: ReasoningTokens) -> Usage {
        let apart = match reasoning {
            ReasoningTokens::InCompletion => 0,
            ReasoningTokens::Separate => self
                .completion_tokens_details
                .as_ref()
                .map_or(0, |d| d.reasoning_tokens),
        };
        Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.completion_tokens.saturating_add(apart),
            // Priced by the chain, which knows the logical model.
            cost_micro_usd: 0,
        }
    }
}

pub(super) fn tool_call(c: WireToolCall) -> Result<ToolCall, ProviderError> {
    let name = c.function.name.clone();
    c.into_tool_call().map_err(|e| {
        ProviderError::Malformed(format!(
            "tool call {name} has arguments that are not JSON: {e}"
        ))
    })
}

/// Parse a chat completions response body.
pub fn parse_response(text: &str, quirks: Quirks) -> Result<Completion, ProviderError> {
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
        usage: wire.usage.unwrap_or_default().normalize(quirks.reasoning),
        finish_reason: choice
            .finish_reason
            .map_or(FinishReason::Stop, FinishReason::from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::providers::ProviderError;
    use hermes_types::model::Usage;

    #[test]
    fn tool_calls_and_usage_are_parsed() {
        let body = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"call_1","type":"function","function":{"name":"current_time","arguments":"{\"timezone\":\"Asia/Tokyo\"}"}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#;
        let c = parse_response(body, Quirks::default()).unwrap();
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
            parse_response(r#"{"choices":null}"#, Quirks::default()),
            Err(ProviderError::Malformed(_))
        ));
        let bad = r#"{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"t","arguments":"{nope"}}]}}]}"#;
        assert!(matches!(
            parse_response(bad, Quirks::default()),
            Err(ProviderError::Malformed(_))
        ));
    }

    #[test]
    fn recorded_completion_normalizes_usage() {
        let c = parse_response(
            include_str!("../../../tests/fixtures/openai/chat_completion.json"),
            Quirks::default(),
        )
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
    fn xai_reasoning_tokens_are_billed_as_output() {
        // xAI counts reasoning beside completion_tokens (total = 12 + 4 + 30).
        let body = r#"{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],
            "usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":46,
                     "completion_tokens_details":{"reasoning_tokens":30}}}"#;
        let xai = super::super::presets::quirks(hermes_config::BackendKind::Xai);
        assert_eq!(parse_response(body, xai).unwrap().usage.output_tokens, 34);
        // OpenAI counts them inside completion_tokens already.
        let openai = super::super::presets::quirks(hermes_config::BackendKind::Openai);
        assert_eq!(parse_response(body, openai).unwrap().usage.output_tokens, 4);
    }
}
