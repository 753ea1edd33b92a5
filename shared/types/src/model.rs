//! The domain payloads that travel between stages, and the small enums they use.
//!
//! These are the contract between services: the router never sees platform fields, the
//! llm stage never sees HTTP, delivery never sees providers.

use serde::{Deserialize, Serialize};

use crate::envelope::{MessageKind, Payload};

/// Who wrote a chat turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// A tool invocation the model asked for. `arguments` is the parsed JSON object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
    /// Opaque provider state that must travel back with this call on the next turn
    /// (Gemini's thought signature); `None` for providers that have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// One turn of a conversation in provider-neutral form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `Role::Tool`: which call this is the result of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Images sent with a user turn, rendered as image content blocks by the providers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageRef>,
}

/// An image a model should look at: a URL it (or the provider adapter) can fetch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRef {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

impl ChatMessage {
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            images: Vec::new(),
        }
    }

    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
            images: Vec::new(),
        }
    }
}

/// A tool offered to the model: name, description, JSON schema of its arguments, toolset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
    pub toolset: String,
}

/// Token usage of one or more model calls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// What the calls cost, in millionths of a US dollar (integers: sums never drift).
    #[serde(default)]
    pub cost_micro_usd: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.input_tokens += rhs.input_tokens;
        self.output_tokens += rhs.output_tokens;
        self.cost_micro_usd += rhs.cost_micro_usd;
    }
}

/// Subscription tier: chooses the model chain and the budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    Free,
    Starter,
    Pro,
    VenueGrowth,
}

impl Tier {
    pub const ALL: [Tier; 4] = [Tier::Free, Tier::Starter, Tier::Pro, Tier::VenueGrowth];

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Free => "free",
            Tier::Starter => "starter",
            Tier::Pro => "pro",
            Tier::VenueGrowth => "venue-growth",
        }
    }
}

impl std::str::FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tier::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| {
                format!("unknown tier {s:?} (expected free, starter, pro or venue-growth)")
            })
    }
}

/// Where a message came in, and so where its answer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// The OpenAI-compatible HTTP API: the caller waits on the run's event stream.
    Api,
    /// The generic REST channel (`POST /v1/messages`): answered by callback or polling.
    Rest,
    Telegram,
    /// WhatsApp, through the Cloud API or 360dialog.
    Whatsapp,
    Instagram,
}

impl Platform {
    pub const ALL: [Platform; 5] = [
        Platform::Api,
        Platform::Rest,
        Platform::Telegram,
        Platform::Whatsapp,
        Platform::Instagram,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Api => "api",
            Platform::Rest => "rest",
            Platform::Telegram => "telegram",
            Platform::Whatsapp => "whatsapp",
            Platform::Instagram => "instagram",
        }
    }

    pub fn parse(s: &str) -> Option<Platform> {
        Platform::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// What kind of media an inbound message carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    Image,
    Document,
    Voice,
    Audio,
    Video,
    Sticker,
}

/// Media attached to an inbound message: a platform file id, a URL, or both.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Media {
    pub kind: MediaKind,
    /// The platform's own file or media id (fetched through its API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// One inbound message from any channel, normalized: the router never sees platform fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MessageEvent {
    pub platform: Platform,
    /// Stable id of the sender on the platform.
    pub sender_id: String,
    /// The conversation the answer goes to (a Telegram chat, a WhatsApp number, …).
    pub chat_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<Media>,
    /// The platform's id of this message: the dedupe key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_message_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_name: Option<String>,
    pub received_at: chrono::DateTime<chrono::Utc>,
    /// Caller-supplied data (REST channel), kept with the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
}

/// Where the answer of a run goes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyTo {
    pub platform: Platform,
    pub chat_id: String,
    /// REST channel: where the answer is POSTed (configured on the caller's key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
}

/// An inbound message on its way to the router.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Inbound {
    pub event: MessageEvent,
    /// The caller's own conversation (OpenAI-compatible API only); channels send one message
    /// and the router supplies the history.
    #[serde(default)]
    pub conversation: Vec<ChatMessage>,
    /// The model name the caller asked for (cosmetic for the API; echoed back).
    #[serde(default)]
    pub requested_model: Option<String>,
    /// REST channel: the callback URL of the caller's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    /// REST channel: the key that sent it (only that key may read the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_id: Option<uuid::Uuid>,
    /// OpenAI-compatible API: the caller's sampling and output-shape parameters, passed
    /// through to the model call (channels leave them at the defaults).
    #[serde(default, skip_serializing_if = "CallParams::is_default")]
    pub params: CallParams,
    /// OpenAI-compatible API: the caller reads the answer as a stream, so the model call
    /// should append text deltas to the run's event stream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
}

impl Inbound {
    /// Where the answer to this message goes.
    pub fn reply_to(&self) -> ReplyTo {
        ReplyTo {
            platform: self.event.platform,
            chat_id: self.event.chat_id.clone(),
            callback_url: self.callback_url.clone(),
        }
    }
}

impl Payload for Inbound {
    const KIND: MessageKind = MessageKind::Inbound;
}

/// A model call to make, with everything needed to make it (stages keep no state).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LlmRequest {
    pub reply_to: ReplyTo,
    pub tier: Tier,
    /// Logical model names to try in order (the tier's failover chain).
    pub chain: Vec<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// 0 for the first call; 1 for the call after the (single) tool round.
    #[serde(default)]
    pub tool_round: u8,
    /// Usage of the calls already made for this run, so the reply reports the total.
    #[serde(default)]
    pub usage_so_far: Usage,
    #[serde(default)]
    pub requested_model: Option<String>,
    /// The router's bookkeeping for a known user (absent for the OpenAI-compatible API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<Exchange>,
    /// Sampling and output-shape parameters the caller set.
    #[serde(default, skip_serializing_if = "CallParams::is_default")]
    pub params: CallParams,
    /// Stream answer text onto the run's event stream as it arrives (API callers).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    /// The agent's backend override (`hermes agents set … --backend`), tried before the
    /// tier's chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendOverride>,
    /// The workspace whose provider secrets apply (absent: the global ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<uuid::Uuid>,
    /// What the run's tool calls may execute (its engagement mode and allowlist); every
    /// later round of the run carries it unchanged.
    #[serde(default, skip_serializing_if = "ToolPolicy::is_default")]
    pub policy: ToolPolicy,
}

/// The host-tool policy of a run (seed 000's `runtime_policy`): in REVIEW, RESEARCH and
/// DISCUSS runs the local-host toolsets (terminal, file patching, code execution, desktop)
/// never execute; when an allowlist is present, only the local-host toolsets or tools it
/// names may run. Other tools (web, memory, context) are not restricted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolPolicy {
    pub engagement_mode: crate::agent::EngagementMode,
    /// Local-host toolsets or tool names the run may use; absent: no list applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_allowlist: Option<Vec<String>>,
}

impl ToolPolicy {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The policy of a run started from a run under `self` that asks for `requested`: a
    /// restricted mode stays restricted and allowlists only narrow, so a delegated run
    /// never regains what its parent lacked.
    pub fn inherit(&self, requested: &ToolPolicy) -> ToolPolicy {
        use crate::agent::EngagementMode::Execute;
        let engagement_mode = if self.engagement_mode != Execute {
            self.engagement_mode
        } else {
            requested.engagement_mode
        };
        let tool_allowlist = match (&self.tool_allowlist, &requested.tool_allowlist) {
            (None, None) => None,
            (Some(a), None) | (None, Some(a)) => Some(a.clone()),
            (Some(a), Some(b)) => Some(a.iter().filter(|x| b.contains(x)).cloned().collect()),
        };
        ToolPolicy {
            engagement_mode,
            tool_allowlist,
        }
    }
}

impl LlmRequest {
    /// A first call of `chain` on `messages`: no tools, no exchange, default parameters.
    pub fn new(
        reply_to: ReplyTo,
        tier: Tier,
        chain: Vec<String>,
        messages: Vec<ChatMessage>,
    ) -> Self {
        Self {
            reply_to,
            tier,
            chain,
            messages,
            tools: Vec::new(),
            tool_round: 0,
            usage_so_far: Usage::default(),
            requested_model: None,
            exchange: None,
            params: CallParams::default(),
            stream: false,
            backend: None,
            workspace: None,
            policy: ToolPolicy::default(),
        }
    }
}

/// An agent pinned to one backend and model at run time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendOverride {
    pub backend: crate::backend::BackendKind,
    pub model: String,
}

/// Parameters of a model call that change its answer: all part of the response-cache key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CallParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Caller's cap on output tokens, never above the model's own cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Structured output: the answer must be JSON matching this schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<JsonSchemaFormat>,
}

impl CallParams {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// OpenAI's `response_format: {"type": "json_schema", "json_schema": {name, schema, strict}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JsonSchemaFormat {
    pub name: String,
    pub schema: serde_json::Value,
    #[serde(default)]
    pub strict: bool,
}

/// What the router knows about one exchange with a known user, carried through the stages
/// so delivery can log the interaction with its provenance, extend the session history and
/// refund the credit when no answer comes (seed 001 steps 9–10).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub user_id: uuid::Uuid,
    pub session_id: uuid::Uuid,
    /// The tier the run was answered on (memory extraction uses its chain).
    pub tier: Tier,
    /// The user's turn as it entered the history.
    pub user_text: String,
    pub provenance: Provenance,
}

/// The provenance `meta` of an interaction (seed 001, "Monitoring Hermes"), filled in stage
/// by stage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Provenance {
    pub soul_load_ms: u64,
    pub semantic_recall_used: bool,
    pub llm_backend: Option<String>,
    pub llm_cache_hit: bool,
    pub tools: Vec<String>,
    pub tool_exec_ms: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Cost in millionths of a US dollar: integers, so sums never drift.
    pub cost_micro_usd: u64,
    pub intent: Option<String>,
    pub schema_tokens_saved: u64,
}

impl Provenance {
    /// The `meta` JSON of the interactions table, in the seed's field names.
    pub fn to_meta(&self) -> serde_json::Value {
        serde_json::json!({
            "soul_load_ms": self.soul_load_ms,
            "semantic_recall_used": self.semantic_recall_used,
            "llm_backend": self.llm_backend,
            "llm_cache_hit": self.llm_cache_hit,
            "tools": self.tools.iter().map(|n| serde_json::json!({ "name": n })).collect::<Vec<_>>(),
            "tool_exec_ms": self.tool_exec_ms,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            // Display only; the integer micro-dollars are the record.
            "cost_usd": self.cost_micro_usd as f64 / 1_000_000.0,
            "cost_micro_usd": self.cost_micro_usd,
            "intent": self.intent,
            "schema_tokens_saved": self.schema_tokens_saved,
        })
    }
}

impl Payload for LlmRequest {
    const KIND: MessageKind = MessageKind::LlmRequest;
}

/// Tool calls to execute; `request` already ends with the assistant turn that asked for them.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ToolRequest {
    pub request: LlmRequest,
    pub calls: Vec<ToolCall>,
}

impl Payload for ToolRequest {
    const KIND: MessageKind = MessageKind::ToolRequest;
}

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
}

impl FailureCode {
    pub const ALL: [FailureCode; 7] = [
        FailureCode::ProvidersUnavailable,
        FailureCode::ProviderRejected,
        FailureCode::Invalid,
        FailureCode::BudgetExceeded,
        FailureCode::BudgetUnavailable,
        FailureCode::SpendingPaused,
        FailureCode::Capacity,
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

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Answered {
        text: String,
        model: String,
        usage: Usage,
        finish_reason: String,
        #[serde(default)]
        tools_used: Vec<String>,
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
        }
    }

    /// A message from Hermes itself (signup prompt, upgrade prompt): answered without a model.
    pub fn notice(reply_to: ReplyTo, reason: &'static str, text: impl Into<String>) -> Self {
        Self {
            reply_to,
            outcome: Outcome::Answered {
                text: text.into(),
                model: "hermes".into(),
                usage: Usage::default(),
                finish_reason: reason.into(),
                tools_used: Vec::new(),
            },
            exchange: None,
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

/// The wake signal owed to an external agent (seed 000, "the push direction"): delivery
/// signs and POSTs it to the agent's webhook URL. The AgentRun row, created in the same
/// transaction, is the source of truth; the wake is only a nudge.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AgentWake {
    /// The `webhook_deliveries` row this wake fulfils (`X-Forge-Delivery`).
    pub delivery_id: uuid::Uuid,
    pub agent_id: uuid::Uuid,
    pub profile_key: String,
    /// `AGENT_ASSIGNED` for a new run.
    pub event: String,
    pub dispatch: crate::agent::Dispatch,
    pub engagement_mode: crate::agent::EngagementMode,
    pub contract_version: String,
    /// Host-side tools the run may use (empty in restricted modes).
    pub tool_allowlist: Vec<String>,
    /// The message that caused the run, so the agent can answer without a round trip.
    pub message: MessageEvent,
}

impl Payload for AgentWake {
    const KIND: MessageKind = MessageKind::AgentWake;
}

/// One finished exchange to mine for facts about the user (seed 001 step 10,
/// `memory_writer.extract_and_save`): sent by delivery after the answer is out, handled by
/// the llm stage, so extraction never delays a reply.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemoryExtract {
    pub user_id: uuid::Uuid,
    pub tier: Tier,
    pub user_text: String,
    pub answer: String,
}

impl Payload for MemoryExtract {
    const KIND: MessageKind = MessageKind::MemoryExtract;
}

#[cfg(test)]
mod policy_tests {
    use super::ToolPolicy;
    use crate::agent::EngagementMode::{Execute, Review};

    fn p(mode: crate::agent::EngagementMode, list: Option<&[&str]>) -> ToolPolicy {
        ToolPolicy {
            engagement_mode: mode,
            tool_allowlist: list.map(|l| l.iter().map(|s| s.to_string()).collect()),
        }
    }

    #[test]
    fn a_started_run_never_regains_what_its_parent_lacked() {
        assert_eq!(
            p(Review, None).inherit(&p(Execute, None)).engagement_mode,
            Review
        );
        assert_eq!(
            p(Execute, None).inherit(&p(Review, None)).engagement_mode,
            Review
        );
        let narrowed = p(Execute, Some(&["a", "b"])).inherit(&p(Execute, Some(&["b", "c"])));
        assert_eq!(narrowed, p(Execute, Some(&["b"])));
        assert_eq!(
            p(Execute, Some(&["a"])).inherit(&p(Execute, None)),
            p(Execute, Some(&["a"]))
        );
        assert!(p(Execute, None).inherit(&p(Execute, None)).is_default());
    }
}
