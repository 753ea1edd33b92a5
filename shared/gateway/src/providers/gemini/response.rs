//! A Gemini answer read back into a [`Completion`]: the wire types, refusals (error objects
//! and blocked prompts), finish reasons, tool call ids and the usage normalizer.

use hermes_types::model::{ToolCall, Usage};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::providers::http::{self, RejectReason};
use crate::providers::{Completion, ProviderError};
use hermes_types::model::FinishReason;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireResponse {
    #[serde(default)]
    candidates: Option<Vec<WireCandidate>>,
    #[serde(default)]
    prompt_feedback: Option<WirePromptFeedback>,
    #[serde(default)]
    pub(super) usage_metadata: Option<WireUsage>,
    /// An error reported inside a 200 stream (the status was already sent).
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireCandidate {
    #[serde(default)]
    pub(super) content: Option<WireContent>,
    #[serde(default)]
    pub(super) finish_reason: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct WireContent {
    #[serde(default)]
    pub(super) parts: Vec<WirePart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WirePart {
    #[serde(default)]
    text: Option<String>,
    /// A thinking summary, not part of the answer.
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    function_call: Option<WireFunctionCall>,
    #[serde(default)]
    thought_signature: Option<String>,
}

#[derive(Deserialize)]
struct WireFunctionCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WirePromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
    #[serde(default)]
    block_reason_message: Option<String>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    code: u16,
    #[serde(default)]
    message: String,
    #[serde(default)]
    status: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireUsage {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    tool_use_prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: u64,
}

impl WireUsage {
    /// The usage normalizer of this wire format: prompt (plus tool-use prompt) → input;
    /// candidates plus thoughts → output, because Gemini bills thinking tokens as output
    /// and does not count them in `candidatesTokenCount`.
    pub(super) fn normalize(&self) -> Usage {
        Usage {
            input_tokens: self.prompt_token_count + self.tool_use_prompt_token_count,
            output_tokens: self.candidates_token_count + self.thoughts_token_count,
            // Priced by the chain, which knows the logical model.
            cost_micro_usd: 0,
        }
    }
}

/// Our finish reason for Gemini's `finishReason`.
fn finish_reason(raw: Option<&str>, has_calls: bool) -> FinishReason {
    match raw {
        None | Some("STOP") if has_calls => FinishReason::ToolCalls,
        None | Some("STOP") => FinishReason::Stop,
        Some("MAX_TOKENS") => FinishReason::Length,
        Some(
            "SAFETY"
            | "RECITATION"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT",
        ) => FinishReason::ContentFilter,
        Some(other) => FinishReason::from(other.to_ascii_lowercase()),
    }
}

/// A tool call id: Gemini's own when it gives one, else a fresh unique one. Unique rather
/// than positional because the history may fail over to a backend (Anthropic) that refuses
/// repeated tool call ids within a conversation.
fn call_id(given: Option<String>) -> String {
    given
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| format!("call_{}", uuid::Uuid::now_v7().simple()))
}

impl WireResponse {
    /// The error a chunk without an answer means: an error object, or a blocked prompt.
    pub(super) fn refusal(&self) -> Option<ProviderError> {
        if let Some(e) = &self.error {
            let status = reqwest::StatusCode::from_u16(e.code)
                .unwrap_or(reqwest::StatusCode::INTERNAL_SERVER_ERROR);
            let body = json!({ "error": { "message": e.message, "status": e.status } });
            return Some(http::status_error(status, None, &body.to_string()));
        }
        let has_candidates = self.candidates.as_ref().is_some_and(|c| !c.is_empty());
        let reason = self
            .prompt_feedback
            .as_ref()
            .and_then(|f| f.block_reason.as_deref())
            .filter(|_| !has_candidates)?;
        let detail = self
            .prompt_feedback
            .as_ref()
            .and_then(|f| f.block_reason_message.as_deref())
            .map(|m| format!(": {m}"))
            .unwrap_or_default();
        Some(ProviderError::Rejected {
            status: 400,
            reason: RejectReason::ContentFilter,
            message: format!("Gemini blocked the prompt ({reason}){detail}"),
        })
    }

    /// The first candidate's parts and finish reason (Gemini answers one candidate).
    pub(super) fn into_first_candidate(self) -> Option<WireCandidate> {
        self.candidates.and_then(|c| c.into_iter().next())
    }
}

/// Collects the answer's text and calls from parts, skipping thinking summaries.
#[derive(Default)]
pub(super) struct Parts {
    text: String,
    tool_calls: Vec<ToolCall>,
}

impl Parts {
    /// Take in one candidate's parts; returns the answer text they added, in order.
    pub(super) fn add(&mut self, parts: Vec<WirePart>) -> Vec<String> {
        let mut added = Vec::new();
        for part in parts {
            if let Some(call) = part.function_call {
                self.tool_calls.push(ToolCall {
                    id: call_id(call.id),
                    name: call.name,
                    arguments: call.args.filter(|a| !a.is_null()).unwrap_or(json!({})),
                    signature: part.thought_signature,
                });
            } else if let Some(text) = part.text.filter(|t| !part.thought && !t.is_empty()) {
                self.text.push_str(&text);
                added.push(text);
            }
        }
        added
    }

    pub(super) fn into_completion(self, usage: Usage, raw_finish: Option<&str>) -> Completion {
        let finish_reason = finish_reason(raw_finish, !self.tool_calls.is_empty());
        Completion {
            text: Some(self.text).filter(|t| !t.is_empty()),
            tool_calls: self.tool_calls,
            usage,
            finish_reason,
        }
    }
}

/// Parse a `generateContent` response body.
pub fn parse_response(text: &str) -> Result<Completion, ProviderError> {
    let wire: WireResponse = serde_json::from_str(text)
        .map_err(|e| ProviderError::Malformed(format!("not a Gemini response: {e}")))?;
    if let Some(e) = wire.refusal() {
        return Err(e);
    }
    let usage = wire.usage_metadata.as_ref().map(WireUsage::normalize);
    let candidate = wire
        .into_first_candidate()
        .ok_or_else(|| ProviderError::Malformed("no candidates in the response".into()))?;
    let mut parts = Parts::default();
    parts.add(candidate.content.map(|c| c.parts).unwrap_or_default());
    Ok(parts.into_completion(
        usage.unwrap_or_default(),
        candidate.finish_reason.as_deref(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::gemini::test_support::*;
    use hermes_types::model::Usage;
    use serde_json::json;

    #[test]
    fn text_response_skips_thoughts_and_bills_thinking_as_output() {
        let c = parse_response(TEXT).unwrap();
        assert_eq!(
            c.text.as_deref(),
            Some("We open at 10:00 on Sundays and close at 18:00.")
        );
        assert!(c.tool_calls.is_empty());
        assert_eq!(c.finish_reason, "stop");
        // 14 candidates + 327 thinking tokens are output; total 398 = 57 + 14 + 327.
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 57,
                output_tokens: 341,
                cost_micro_usd: 0
            }
        );
    }

    #[test]
    fn usage_counts_tool_use_prompt_as_input() {
        let u: WireUsage = serde_json::from_value(json!({
            "promptTokenCount": 100, "toolUsePromptTokenCount": 20,
            "candidatesTokenCount": 5, "thoughtsTokenCount": 7, "totalTokenCount": 132
        }))
        .unwrap();
        assert_eq!(
            u.normalize(),
            Usage {
                input_tokens: 120,
                output_tokens: 12,
                cost_micro_usd: 0
            }
        );
    }

    #[test]
    fn finish_reasons_are_mapped() {
        assert_eq!(finish_reason(Some("STOP"), false), "stop");
        assert_eq!(finish_reason(Some("STOP"), true), "tool_calls");
        assert_eq!(finish_reason(Some("MAX_TOKENS"), true), "length");
        for r in [
            "SAFETY",
            "RECITATION",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
        ] {
            assert_eq!(finish_reason(Some(r), false), "content_filter", "{r}");
        }
        assert_eq!(
            finish_reason(Some("MALFORMED_FUNCTION_CALL"), false),
            "malformed_function_call"
        );
    }
}
