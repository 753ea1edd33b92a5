//! One inbound message from any channel, normalized, and where its answer goes.

use crate::ids::{AgentId, ApiKeyId, SessionId, WorkspaceId};
use serde::{Deserialize, Serialize};

use super::delegation::Delegated;
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

impl MediaKind {
    /// The spelling on the wire and in metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaKind::Image => "image",
            MediaKind::Document => "document",
            MediaKind::Voice => "voice",
            MediaKind::Audio => "audio",
            MediaKind::Video => "video",
            MediaKind::Sticker => "sticker",
        }
    }
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

impl Media {
    /// The item as operators (`attachments_fetch`) and agents (the context bundle, the
    /// wake) read it: a reference on `platform` (its file id or the URL it sent), never
    /// bytes or a download URL.
    pub fn attachment(&self, platform: Option<&str>) -> serde_json::Value {
        serde_json::json!({
            "kind": self.kind,
            "platform": platform,
            "file_id": self.platform_id,
            "url": self.url,
            "mime_type": self.mime_type,
        })
    }
}

/// A chat platform's media item named for the stage that needs its bytes: the platform it
/// came from (whose credentials fetch it) and the item as ingest normalized it. Queued
/// messages carry this, never the bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MediaRef {
    pub platform: Platform,
    pub media: Media,
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
    /// The platform's id of the message the answer quotes (a Telegram group message the bot
    /// answers, docs/channels.md "Group chats"); absent: no quote. Optional with a default,
    /// so a reply written by an older build still reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
    /// A Discord slash command's interaction, whose webhook the answer is sent on; absent:
    /// the answer goes to the channel (docs/channels.md, "Discord").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interaction: Option<Interaction>,
}

impl ReplyTo {
    /// A chat on a chat platform (no callback, no quote).
    pub fn chat(platform: Platform, chat_id: impl Into<String>) -> Self {
        Self {
            platform,
            chat_id: chat_id.into(),
            callback_url: None,
            quote: None,
            interaction: None,
        }
    }
}

/// Whether a chat message came from a one-to-one chat or a group, where everyone reads the
/// answer (docs/security.md, "Conversations and tools").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatKind {
    /// A one-to-one chat (and every channel without groups).
    #[default]
    Direct,
    /// A group or supergroup: the answer is read by every member.
    Group,
}

impl ChatKind {
    /// Whether this is the default, left out of the serialized message.
    pub fn is_direct(&self) -> bool {
        *self == ChatKind::Direct
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
    /// The model name the caller asked for (echoed back).
    #[serde(default)]
    pub requested_model: Option<String>,
    /// The configured model (a `[models]` key) the caller chose by `provider:model`, tried
    /// before the tier's chain; ingest resolved and checked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen_model: Option<String>,
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
    /// A group message (Telegram groups and supergroups): the router leaves the sender's
    /// other conversations out of the model context (docs/security.md).
    #[serde(default, skip_serializing_if = "ChatKind::is_direct")]
    pub chat_kind: ChatKind,
    /// The platform's id of this message when the answer should quote it (a group message);
    /// it travels to delivery as [`ReplyTo::quote`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
    /// A Discord slash command: the interaction its answer is sent on; it travels to
    /// delivery as [`ReplyTo::interaction`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interaction: Option<Interaction>,
    /// A burst (docs/channels.md, bursts): this message is the held messages of one
    /// conversation routed as one turn, this many of them; the router routes it at once
    /// instead of holding it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// OpenAI-compatible API: the session of a message that can be continued (a stored
    /// response, or a run continuing one); `None` for one that cannot (chat completions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_session: Option<ApiSession>,
    /// OpenAI-compatible API (an A2A task, docs/a2a.md): the workspace whose provider
    /// secrets the run's model calls use; `None`: the install's global ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceId>,
    /// A run another run's `delegate_task_async` started (docs/a2a.md, "Delegating to
    /// other workspaces"): its parent and depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation: Option<Delegated>,
}

/// The session of an OpenAI-compatible API message (docs/api.md, "Responses"): a chain of
/// stored responses, and the runs that continue one, are one session, opened by the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiSession {
    /// The first of a chain: the router opens a session for it.
    Open,
    /// A continuation: the session of the chain it continues, carried on however long it
    /// has been idle (a new one when it is not the caller's key's).
    Continue(SessionId),
}

impl ApiSession {
    /// The session of a message continuing a chain whose runs were routed into `chain`
    /// (`None`: none of them was routed yet, so this one opens it).
    pub fn continuing(chain: Option<SessionId>) -> Self {
        chain.map_or(Self::Open, Self::Continue)
    }
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
            chosen_model: None,
            callback_url: None,
            api_key_id: None,
            params: CallParams::default(),
            stream: false,
            policy: ToolPolicy::default(),
            job: None,
            forge: None,
            chat_kind: ChatKind::Direct,
            quote: None,
            interaction: None,
            burst: None,
            api_session: None,
            workspace: None,
            delegation: None,
        }
    }

    /// Where the answer to this message goes.
    pub fn reply_to(&self) -> ReplyTo {
        ReplyTo {
            platform: self.event.platform,
            chat_id: self.event.chat_id.clone(),
            callback_url: self.callback_url.clone(),
            quote: self.quote.clone(),
            interaction: self.interaction.clone(),
        }
    }

    /// The platform's id of the person's own chat message this is: none for a scheduled
    /// job's run (its id is the job's), a Forge wake or the API channels. Its receipt and
    /// WhatsApp's 24-hour window are about messages people wrote (docs/channels.md).
    pub fn user_message_id(&self) -> Option<&str> {
        if self.job.is_some() || self.forge.is_some() || !self.event.platform.is_chat() {
            return None;
        }
        self.event.external_message_id.as_deref()
    }
}

impl Payload for Inbound {
    const KIND: MessageKind = MessageKind::Inbound;
}
