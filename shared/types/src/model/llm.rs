//! What a model call needs (the request, its tool policy and parameters) and what travels
//! with it for bookkeeping (the exchange and its provenance); tool requests.

use crate::ids::{ApiKeyId, SessionId, UserId, WorkspaceId};
use serde::{Deserialize, Serialize};

use super::*;
use crate::envelope::{MessageKind, Payload};

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
    /// 0 for the first call; n for the call after the n-th tool round.
    #[serde(default)]
    pub tool_round: u8,
    /// How many tool rounds the run may take: one for chat messages and API runs (seed
    /// 001), the agent's `max_tool_rounds` for an agent's run. A message written before
    /// the field existed reads as one, as it was then.
    #[serde(default = "one_round", skip_serializing_if = "is_one_round")]
    pub max_tool_rounds: u8,
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
    pub workspace: Option<WorkspaceId>,
    /// The API key whose message this call answers: metered against its budgets too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<ApiKeyId>,
    /// What the run's tool calls may execute (its engagement mode and allowlist); every
    /// later round of the run carries it unchanged.
    #[serde(default, skip_serializing_if = "ToolPolicy::is_default")]
    pub policy: ToolPolicy,
    /// A chat platform's images of the user's turn, by reference only: the llm stage
    /// fetches them into the last user turn's image blocks right before each model call,
    /// so their bytes never travel through the broker (docs/channels.md, media).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub media: Vec<MediaRef>,
    /// The platform's id of the person's chat message this run answers (a WhatsApp wamid),
    /// for the read receipt shown when the run starts (docs/channels.md, "Presence");
    /// absent for a job's run and the API channels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inbound_message_id: Option<String>,
    /// The model calls the run has made so far, each with its own usage, for the run's
    /// record (docs/console.md, "A run's page").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<ModelCall>,
}

/// The host-tool policy of a run (docs/agents.md, "Engagement modes": the `runtime_policy`): in REVIEW, RESEARCH and
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

/// Most tool rounds any run may take (the database bounds `agents.max_tool_rounds` so).
pub const MAX_TOOL_ROUNDS: u8 = 32;

/// The tool rounds of a run of an agent whose bound is `agent_bound`, within 1 and
/// [`MAX_TOOL_ROUNDS`].
pub fn agent_tool_rounds(agent_bound: i32) -> u8 {
    agent_bound.clamp(1, i32::from(MAX_TOOL_ROUNDS)) as u8
}

fn one_round() -> u8 {
    1
}

fn is_one_round(n: &u8) -> bool {
    *n == 1
}

impl LlmRequest {
    /// Whether a model's request for tools is answered with a tool round: the run has
    /// rounds left.
    pub fn may_take_tool_round(&self) -> bool {
        self.tool_round < self.max_tool_rounds
    }

    /// A first call of `chain` on `messages`: no tools, no exchange, default parameters.
    /// The workspace whose Forge budget this call counts against: a run a Forge's wake
    /// started (it answers to the Forge platform) has no user and no key to meter, so its
    /// agent's workspace is (docs/models-and-budgets.md, "Forge runs").
    pub fn forge_workspace(&self) -> Option<WorkspaceId> {
        (self.reply_to.platform == Platform::Forge)
            .then_some(self.workspace)
            .flatten()
    }

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
            max_tool_rounds: one_round(),
            usage_so_far: Usage::default(),
            requested_model: None,
            exchange: None,
            params: CallParams::default(),
            stream: false,
            media: Vec::new(),
            backend: None,
            workspace: None,
            api_key: None,
            policy: ToolPolicy::default(),
            inbound_message_id: None,
            calls: Vec::new(),
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
/// refund the credit when no answer comes (docs/models-and-budgets.md, steps 9–10 of the routing pipeline).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub user_id: UserId,
    pub session_id: SessionId,
    /// The tier the run was answered on (memory extraction uses its chain).
    pub tier: Tier,
    /// The user's turn as it entered the history.
    pub user_text: String,
    pub provenance: Provenance,
}

/// The provenance `meta` of an interaction (docs/models-and-budgets.md, step 9 of the routing pipeline), filled in stage
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
    /// Operators' answers to the calls of this round that waited for approval
    /// (docs/operator-mcp.md, approvals): present when the round resumes after them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<ApprovalDecision>,
    /// Results of calls of this round made already, by call id: a round held for the runs
    /// its `delegate_task_async` calls started resumes with their answers and with what
    /// its other calls returned before it was held, so nothing of it runs twice
    /// (docs/a2a.md, "Delegating to other workspaces").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ToolResult>,
}

/// One call's result made before its round resumed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub text: String,
}

impl ToolRequest {
    /// The result of call `call_id` made already, if any.
    pub fn result_of(&self, call_id: &str) -> Option<&str> {
        self.results
            .iter()
            .find(|r| r.call_id == call_id)
            .map(|r| r.text.as_str())
    }
}

impl Payload for ToolRequest {
    const KIND: MessageKind = MessageKind::ToolRequest;
}

#[cfg(test)]
mod round_tests {
    use super::*;

    #[test]
    fn a_request_written_before_the_round_bound_takes_one_round() {
        let to = ReplyTo {
            platform: Platform::Telegram,
            chat_id: "c".into(),
            callback_url: None,
            quote: None,
            interaction: None,
        };
        let request = LlmRequest::new(to, Tier::Free, Vec::new(), Vec::new());
        let mut wire = serde_json::to_value(&request).unwrap();
        assert!(
            wire.get("max_tool_rounds").is_none(),
            "one round stays off the wire"
        );
        wire.as_object_mut().unwrap().remove("max_tool_rounds");
        let old: LlmRequest = serde_json::from_value(wire).unwrap();
        assert_eq!(old.max_tool_rounds, 1);
        assert!(old.may_take_tool_round());
        let after = LlmRequest {
            tool_round: 1,
            ..old
        };
        assert!(!after.may_take_tool_round());
        let agent = LlmRequest {
            max_tool_rounds: 4,
            tool_round: 3,
            ..after
        };
        assert!(agent.may_take_tool_round());
    }
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
