//! Work owed after a run (the wake of an external agent, a memory extraction) and the
//! weekly dream of a user.

use crate::ids::{AgentId, DeliveryId, DraftId, UserId};
use serde::{Deserialize, Serialize};

use super::*;
use crate::envelope::{MessageKind, Payload};

/// The wake signal owed to an external agent (docs/agents.md, "Signed agent webhooks"): delivery
/// signs and POSTs it to the agent's webhook URL. The AgentRun row, created in the same
/// transaction, is the source of truth; the wake is only a nudge.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AgentWake {
    /// The `webhook_deliveries` row this wake fulfils (`X-Forge-Delivery`).
    pub delivery_id: DeliveryId,
    pub agent_id: AgentId,
    pub profile_key: String,
    pub event: crate::agent::WakeEvent,
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

/// One finished exchange to mine for facts about the user (docs/models-and-budgets.md, step 10 of the routing pipeline,
/// `memory_writer.extract_and_save`): sent by delivery after the answer is out, handled by
/// the llm stage, so extraction never delays a reply.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemoryExtract {
    pub user_id: UserId,
    pub tier: Tier,
    pub user_text: String,
    pub answer: String,
}

impl Payload for MemoryExtract {
    const KIND: MessageKind = MessageKind::MemoryExtract;
}

/// One user's week for the dreaming engine (docs/models-and-budgets.md, "The dreaming
/// engine"): queued by the router once the ISO week is over, with the `user_dreams` row that
/// makes it once per user and week; the llm stage reads the week's conversations and the
/// user's memory and writes one insight and at most 3 knowledge gaps.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Dream {
    pub user_id: UserId,
    /// Monday 00:00 UTC of the week; the week ends 7 days later.
    pub week_start: chrono::DateTime<chrono::Utc>,
    /// The tier whose model chain dreams (`HERMES_DREAMING_TIER`, else the user's own).
    pub tier: Tier,
}

impl Payload for Dream {
    const KIND: MessageKind = MessageKind::Dream;
}

/// An external agent's draft as it stands after a chunk (docs/agents.md, "Drafts"): delivery
/// shows it where the platform can edit a message as it grows (Telegram), and ignores it
/// elsewhere (the final text arrives as the run's reply, with the same draft id). `chunks`
/// orders updates: one older than what the chat already shows is dropped.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DraftUpdate {
    pub draft_id: DraftId,
    pub reply_to: ReplyTo,
    /// The whole text so far (not the delta: an update may be skipped or arrive twice).
    pub text: String,
    pub chunks: i32,
}

impl Payload for DraftUpdate {
    const KIND: MessageKind = MessageKind::DraftUpdate;
}
