//! An Anthropic Messages answer read back into a [`Completion`]: the wire types, usage with
//! cache tokens counted as input, stop reasons, and `{"type":"error"}` bodies after a 200.

use hermes_types::model::{ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::providers::http;
use crate::providers::{Completion, ProviderError};
use hermes_types::model::FinishReason;

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
pub(super) struct WireUsage {
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
    pub(super) fn normalize(&self) -> Usage {
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
    pub(super) fn update(&mut self, later: WireUsage) {
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
pub(super) fn finish_reason(stop_reason: Option<&str>) -> FinishReason {
    FinishReason::from(match stop_reason {
        None | Some("end_turn" | "stop_sequence") => "stop",
        Some("max_tokens") => "length",
        Some("tool_use") => "tool_calls",
        Some("refusal") => "content_filter",
        Some(other) => other,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::ProviderError;
    use crate::providers::anthropic::test_support::*;
    use crate::providers::http::RejectReason;
    use hermes_types::model::{ToolCall, Usage};
    use serde_json::json;

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
}
