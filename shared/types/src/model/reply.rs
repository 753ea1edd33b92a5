//! How a run ends: the outcome and the reply delivery hands to whoever waits.

use serde::{Deserialize, Serialize};

use super::*;
use crate::envelope::{MessageKind, Payload};

/// Why a run ended without an answer. The caller sees the code; operators see the metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCode {
    /// Every backend of the chain failed.
    ProvidersUnavailable,
    /// The request itself was refused by the provider (bad input, context too long).
    ProviderRejected,
    /// The request could not be processed (malformed after acceptance).
    Invalid,
    /// The user's daily or monthly token budget is spent.
    BudgetExceeded,
    /// The budgets could not be checked (Redis down): per-user budgets fail closed.
    BudgetUnavailable,
    /// Model calls are paused platform-wide: the global daily spend cap or the killswitch.
    SpendingPaused,
    /// Every model-call slot stayed busy for the whole bounded wait.
    Capacity,
    /// The provider keys of the run's workspace could not be read; the run is not answered
    /// with the global keys instead (docs/security.md).
    WorkspaceSecretsUnavailable,
    /// The run was stopped at a caller's request (`POST /v1/runs/{id}/stop`) before it ended:
    /// no further model or tool call was made (docs/api.md, runs). The run is closed
    /// `cancelled`, not `failed`, and refunded like a failure.
    Cancelled,
    /// An external agent did not answer its run before the agent's reply deadline
    /// (docs/agents.md, "When an external run ends"): the caller gets a fallback reply, the run
    /// is closed `expired` and refunded, and the agent's slot is free again.
    Expired,
    /// An external agent gave the run up (`runs.fail`), with its reason kept for operators.
    AgentFailed,
    /// A Forge run's required loop could not be done before the model acted: the Forge
    /// lacks `agent.inbox.list`, `agent.inbox.ack` or `agent.context.bundle`, its inbox has
    /// no woken run, or a call failed (docs/agents.md, "The loop, enforced"). No model call
    /// was made; the run's `error_detail` says which.
    ForgeLoopFailed,
}

impl FailureCode {
    pub const ALL: [FailureCode; 12] = [
        FailureCode::ProvidersUnavailable,
        FailureCode::ProviderRejected,
        FailureCode::Invalid,
        FailureCode::BudgetExceeded,
        FailureCode::BudgetUnavailable,
        FailureCode::SpendingPaused,
        FailureCode::Capacity,
        FailureCode::WorkspaceSecretsUnavailable,
        FailureCode::Cancelled,
        FailureCode::Expired,
        FailureCode::AgentFailed,
        FailureCode::ForgeLoopFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::ProvidersUnavailable => "providers_unavailable",
            FailureCode::ProviderRejected => "provider_rejected",
            FailureCode::Invalid => "invalid",
            FailureCode::BudgetExceeded => "budget_exceeded",
            FailureCode::BudgetUnavailable => "budget_unavailable",
            FailureCode::SpendingPaused => "spending_paused",
            FailureCode::Capacity => "capacity",
            FailureCode::WorkspaceSecretsUnavailable => "workspace_secrets_unavailable",
            FailureCode::Cancelled => "cancelled",
            FailureCode::Expired => "expired",
            FailureCode::AgentFailed => "agent_failed",
            FailureCode::ForgeLoopFailed => "forge_loop_failed",
        }
    }

    /// The code stored as `s` (unknown codes read as providers unavailable).
    pub fn parse(s: &str) -> FailureCode {
        FailureCode::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .unwrap_or(FailureCode::ProvidersUnavailable)
    }
}

/// Why an answer ended, in the words API callers are shown (OpenAI's `finish_reason`, plus
/// the reasons Hermes gives its own notices). A provider's reason we have no name for is
/// kept as it came (`Other`), so nothing a caller saw before is lost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The output token limit cut the answer.
    Length,
    /// The model asked for tools.
    ToolCalls,
    /// The provider withheld or cut the answer for its content.
    ContentFilter,
    /// The tool round's second call failed; the answer is the tools' raw output.
    ToolFallback,
    /// A notice: the sender is not a known, active user.
    SignupRequired,
    /// A notice: the user has no credits left.
    CreditsExhausted,
    /// A notice: the sender writes faster than the inbound rate allows.
    RateLimited,
    /// A notice: the message's file cannot be used (a kind the model cannot read, voice
    /// without transcription, or a file the platform would not give).
    MediaUnusable,
    /// A provider's own reason, passed through.
    Other(String),
}

impl FinishReason {
    const NAMED: [(FinishReason, &'static str); 9] = [
        (FinishReason::Stop, "stop"),
        (FinishReason::Length, "length"),
        (FinishReason::ToolCalls, "tool_calls"),
        (FinishReason::ContentFilter, "content_filter"),
        (FinishReason::ToolFallback, "tool_fallback"),
        (FinishReason::SignupRequired, "signup_required"),
        (FinishReason::CreditsExhausted, "credits_exhausted"),
        (FinishReason::RateLimited, "rate_limited"),
        (FinishReason::MediaUnusable, "media_unusable"),
    ];

    /// The spelling on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Other(s) => s,
            named => Self::NAMED
                .iter()
                .find(|(r, _)| r == named)
                .map_or("stop", |(_, s)| s),
        }
    }
}

impl From<&str> for FinishReason {
    fn from(s: &str) -> Self {
        Self::NAMED
            .iter()
            .find(|(_, name)| *name == s)
            .map_or_else(|| FinishReason::Other(s.to_owned()), |(r, _)| r.clone())
    }
}

impl From<String> for FinishReason {
    fn from(s: String) -> Self {
        FinishReason::from(s.as_str())
    }
}

impl From<FinishReason> for String {
    fn from(r: FinishReason) -> Self {
        r.as_str().to_owned()
    }
}

/// A reason equals its spelling, so `finish_reason == "stop"` reads as it did.
impl PartialEq<&str> for FinishReason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for FinishReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Answered {
        text: String,
        model: String,
        usage: Usage,
        finish_reason: FinishReason,
        #[serde(default)]
        tools_used: Vec<String>,
        /// The tool round the fleet ran for this answer, in order: the assistant turn that
        /// asked for tools, then one tool turn per result (empty when no tool ran). The
        /// Responses API shows it as `function_call` items and rebuilds later turns from it
        /// (docs/api.md, "Responses").
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        transcript: Vec<ChatMessage>,
    },
    Failed {
        code: FailureCode,
        /// A message fit for the end user.
        message: String,
    },
}

/// The final word on a run, for delivery to hand to whoever waits.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Reply {
    pub reply_to: ReplyTo,
    pub outcome: Outcome,
    /// The exchange to log and add to history (absent for API callers and notices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<Exchange>,
    /// Of a failure: what went wrong, scrubbed of credentials, for the run's record and the
    /// logs. Never sent to the caller, who gets the outcome's code and message only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// An external agent's answer that finalizes a draft: where the draft is shown (a
    /// Telegram message edited as it grew), the final text replaces it instead of being sent
    /// again (docs/agents.md, "Drafts").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_id: Option<crate::ids::DraftId>,
    /// A message an operator sent (`messages_send`, docs/operator-mcp.md): delivery logs it
    /// in the conversation's history when it is sent, with no turn it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<OperatorMessage>,
    /// The run's model calls, each with its own usage, written with the run's close
    /// (docs/console.md, "A run's page"); empty for replies no model made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<ModelCall>,
}

/// Where an operator's message is logged once sent, and who sent it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorMessage {
    pub user_id: crate::ids::UserId,
    pub session_id: crate::ids::SessionId,
    /// The operator key that sent it (its id), kept in the interaction's `meta`.
    pub by: String,
}

impl Reply {
    /// A failed reply: the run ends with `code` and a message fit for the end user.
    pub fn failed(reply_to: ReplyTo, code: FailureCode, message: impl Into<String>) -> Self {
        Self {
            reply_to,
            outcome: Outcome::Failed {
                code,
                message: message.into(),
            },
            exchange: None,
            detail: None,
            draft_id: None,
            operator: None,
            calls: Vec::new(),
        }
    }

    /// The reply that ends a run stopped on request at the safe point before `request`'s
    /// model or tool call: closed `cancelled` (and refunded) by delivery like a failure.
    pub fn cancelled(request: &LlmRequest) -> Self {
        Self {
            exchange: request.exchange.clone(),
            calls: request.calls.clone(),
            ..Self::failed(
                request.reply_to.clone(),
                FailureCode::Cancelled,
                "The run was stopped before it finished.",
            )
        }
    }

    /// A message from Hermes itself (signup prompt, upgrade prompt): answered without a model.
    pub fn notice(reply_to: ReplyTo, reason: FinishReason, text: impl Into<String>) -> Self {
        Self {
            reply_to,
            outcome: Outcome::Answered {
                text: text.into(),
                model: "hermes".into(),
                usage: Usage::default(),
                finish_reason: reason,
                tools_used: Vec::new(),
                transcript: Vec::new(),
            },
            exchange: None,
            detail: None,
            draft_id: None,
            operator: None,
            calls: Vec::new(),
        }
    }
}

impl Payload for Reply {
    const KIND: MessageKind = MessageKind::Reply;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_reasons_keep_their_spelling_named_or_not() {
        for (reason, text) in FinishReason::NAMED {
            assert_eq!(reason.as_str(), text);
            assert_eq!(FinishReason::from(text), reason);
            assert_eq!(serde_json::to_value(&reason).unwrap(), text);
        }
        let other: FinishReason = serde_json::from_str("\"malformed_function_call\"").unwrap();
        assert_eq!(other, FinishReason::Other("malformed_function_call".into()));
        assert_eq!(
            serde_json::to_string(&other).unwrap(),
            "\"malformed_function_call\""
        );
    }

    #[test]
    fn tiers_parse_by_their_config_names() {
        for t in Tier::ALL {
            assert_eq!(t.as_str().parse::<Tier>().unwrap(), t);
        }
        assert!("gold".parse::<Tier>().is_err());
        assert_eq!(
            serde_json::to_string(&Tier::VenueGrowth).unwrap(),
            "\"venue-growth\""
        );
    }

    #[test]
    fn usage_adds_up() {
        let mut u = Usage {
            input_tokens: 3,
            output_tokens: 4,
            cost_micro_usd: 5,
        };
        u += Usage {
            input_tokens: 10,
            output_tokens: 1,
            cost_micro_usd: 7,
        };
        assert_eq!(u.total(), 18);
        assert_eq!(u.cost_micro_usd, 12);
    }
}
