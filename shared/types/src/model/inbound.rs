//! One inbound message from any channel, normalized, and where its answer goes.

use crate::ids::{AgentId, ApiKeyId, WorkspaceId};
use serde::{Deserialize, Serialize};

use super::*;
use crate::envelope::{MessageKind, Payload};

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

impl ReplyTo {
    /// A chat on a chat platform (no callback).
    pub fn chat(platform: Platform, chat_id: impl Into<String>) -> Self {
        Self {
            platform,
            chat_id: chat_id.into(),
            callback_url: None,
        }
    }
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
    pub api_key_id: Option<ApiKeyId>,
    /// OpenAI-compatible API: the caller's sampling and output-shape parameters, passed
    /// through to the model call (channels leave them at the defaults).
    #[serde(default, skip_serializing_if = "CallParams::is_default")]
    pub params: CallParams,
    /// OpenAI-compatible API: the caller reads the answer as a stream, so the model call
    /// should append text deltas to the run's event stream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    /// OpenAI-compatible API (`POST /v1/runs`): the host-tool policy the caller dispatched
    /// the run under (its engagement mode and allowlist), which governs what the run is
    /// offered and what its tool calls may execute (docs/api.md, runs).
    #[serde(default, skip_serializing_if = "ToolPolicy::is_default")]
    pub policy: ToolPolicy,
    /// A scheduled job's run (docs/api.md, jobs): its toolsets and model override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<JobRunOptions>,
    /// A Forge's wake ([`Platform::Forge`]): the internal agent it routed to. The wake's
    /// engagement mode and allowlist travel in `policy`, its envelope in the event's
    /// `metadata`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge: Option<ForgeWake>,
    /// A burst (docs/channels.md, bursts): this message is the held messages of one
    /// conversation routed as one turn, this many of them; the router routes it at once
    /// instead of holding it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

/// What ingest settled about a Forge wake before queueing it (docs/agents.md, "Hermes as a
/// Forge agent"): the signature held, the delivery is new, and the profile key names this
/// internal agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeWake {
    /// The internal agent that answers (its persona, tier, tools and round bound).
    pub agent_id: AgentId,
    pub workspace_id: WorkspaceId,
    /// `X-Forge-Delivery`: the wake's id, the same on every retry of it.
    pub delivery_id: String,
    /// `X-Forge-Event` (or the envelope's `kind`): `AGENT_ASSIGNED`, `CHAT_MESSAGE_POSTED`, …
    pub event: String,
    /// The contract version the Forge dispatched under, when it named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_version: Option<String>,
}

impl Inbound {
    /// A channel's message: one event, no conversation of its own, default parameters and
    /// policy (the router supplies the history).
    pub fn of(event: MessageEvent) -> Self {
        Self {
            event,
            conversation: Vec::new(),
            requested_model: None,
            callback_url: None,
            api_key_id: None,
            params: CallParams::default(),
            stream: false,
            policy: ToolPolicy::default(),
            job: None,
            forge: None,
            burst: None,
        }
    }

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
