//! The versioned JSON envelope every bus message travels in (docs/architecture.md#8-the-bus).
//!
//! Readers ignore unknown fields so a rolling upgrade can add fields; the `kind` names
//! the payload type and, through [`MessageKind::stage`], the queue it is routed to.

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::ids::{MessageId, RunId};
use crate::stage::Stage;
use crate::trace::TraceParent;

/// Current envelope version written by this build.
pub const ENVELOPE_VERSION: u32 = 1;

/// What a message asks its consumer to do. Each kind belongs to exactly one stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// A normalized inbound message for the router.
    Inbound,
    /// A model call for the llm stage (first call or the call after a tool round).
    LlmRequest,
    /// Tool calls the model asked for, for the tools stage.
    ToolRequest,
    /// A final answer (or error) to hand to whoever waits for the run.
    Reply,
    /// A signed wake webhook owed to an external agent runtime.
    AgentWake,
    /// Facts to extract from a finished exchange into the user's memory (llm stage).
    MemoryExtract,
    /// An external agent's draft grew: a chat that shows drafts (Telegram) edits its message.
    DraftUpdate,
    /// A Forge run's preflight: the tools stage lists, acknowledges and reads the woken run
    /// through the Forge's MCP server before the model acts.
    ForgePreflight,
    /// A Forge chat run's whole answer, owed to its thread: the tools stage posts it
    /// (`chat.finalizeDraft` or `chat.appendMessage`) once, whichever replica streamed it.
    ForgeAnswer,
    /// A user's week to dream about: one insight and knowledge gaps for the soul (llm stage).
    Dream,
}

impl MessageKind {
    /// The stage whose queue carries this kind.
    pub fn stage(self) -> Stage {
        match self {
            MessageKind::Inbound => Stage::Router,
            MessageKind::LlmRequest => Stage::Llm,
            MessageKind::ToolRequest => Stage::Tools,
            MessageKind::Reply => Stage::Delivery,
            MessageKind::AgentWake => Stage::Webhooks,
            MessageKind::MemoryExtract => Stage::Llm,
            MessageKind::DraftUpdate => Stage::Delivery,
            MessageKind::ForgePreflight => Stage::Tools,
            MessageKind::ForgeAnswer => Stage::Tools,
            MessageKind::Dream => Stage::Llm,
        }
    }
}

/// A payload type that can travel in an envelope.
pub trait Payload: Serialize + DeserializeOwned {
    /// The kind written into the envelope for this payload.
    const KIND: MessageKind;
}

/// The wire envelope: `{ "v", "id", "kind", "run_id", "attempt", "created_at", "traceparent", "payload" }`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Envelope {
    pub v: u32,
    pub id: MessageId,
    pub kind: MessageKind,
    pub run_id: RunId,
    /// How many times this logical step has been retried by delivery's retry schedule.
    #[serde(default)]
    pub attempt: u32,
    pub created_at: DateTime<Utc>,
    #[serde(default)]
    pub traceparent: Option<TraceParent>,
    pub payload: serde_json::Value,
}

/// The envelope could not be decoded or its payload does not match its kind.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    #[error("message is not a valid envelope: {0}")]
    Malformed(#[source] serde_json::Error),
    #[error("envelope version {0} is newer than this build understands ({ENVELOPE_VERSION})")]
    UnsupportedVersion(u32),
    #[error("payload of a {kind:?} message does not match its schema: {source}")]
    Payload {
        kind: MessageKind,
        #[source]
        source: serde_json::Error,
    },
    #[error("expected a {expected:?} message, got {actual:?}")]
    WrongKind {
        expected: MessageKind,
        actual: MessageKind,
    },
}

impl Envelope {
    /// Wrap a payload in a fresh envelope for `run_id`.
    pub fn new<P: Payload>(run_id: RunId, traceparent: Option<TraceParent>, payload: &P) -> Self {
        Self {
            v: ENVELOPE_VERSION,
            id: MessageId::new(),
            kind: P::KIND,
            run_id,
            attempt: 0,
            created_at: Utc::now(),
            traceparent,
            payload: serde_json::to_value(payload).expect("payload types serialize infallibly"),
        }
    }

    /// The next message of the same run: same trace, new id.
    pub fn follow<P: Payload>(&self, payload: &P) -> Self {
        Self::new(self.run_id, self.traceparent.clone(), payload)
    }

    /// Decode an envelope from the bytes of a bus message.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let env: Envelope = serde_json::from_slice(bytes).map_err(EnvelopeError::Malformed)?;
        if env.v > ENVELOPE_VERSION {
            return Err(EnvelopeError::UnsupportedVersion(env.v));
        }
        Ok(env)
    }

    /// Encode for the wire.
    pub fn to_vec(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("envelopes serialize infallibly")
    }

    /// Decode the payload, checking that the kind matches.
    pub fn payload<P: Payload>(&self) -> Result<P, EnvelopeError> {
        if self.kind != P::KIND {
            return Err(EnvelopeError::WrongKind {
                expected: P::KIND,
                actual: self.kind,
            });
        }
        serde_json::from_value(self.payload.clone()).map_err(|source| EnvelopeError::Payload {
            kind: self.kind,
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FailureCode, Platform, Reply, ReplyTo};

    /// A small reply envelope to encode and decode.
    fn sample() -> Envelope {
        let to = ReplyTo {
            platform: Platform::Api,
            chat_id: "c".into(),
            callback_url: None,
            quote: None,
            interaction: None,
        };
        Envelope::new(
            RunId::new(),
            None,
            &Reply::failed(to, FailureCode::Invalid, "boom"),
        )
    }

    #[test]
    fn unknown_fields_are_ignored_for_rolling_upgrades() {
        let env = sample();
        let mut value = serde_json::to_value(&env).unwrap();
        value["added_in_v1_1"] = serde_json::json!({"anything": true});
        let decoded = Envelope::from_slice(&serde_json::to_vec(&value).unwrap()).unwrap();
        assert_eq!(decoded.id, env.id);
        assert_eq!(decoded.kind, MessageKind::Reply);
    }

    #[test]
    fn newer_versions_and_garbage_are_rejected() {
        let env = sample();
        let mut value = serde_json::to_value(&env).unwrap();
        value["v"] = 2.into();
        let err = Envelope::from_slice(&serde_json::to_vec(&value).unwrap()).unwrap_err();
        assert!(matches!(err, EnvelopeError::UnsupportedVersion(2)));
        assert!(matches!(
            Envelope::from_slice(b"{not json"),
            Err(EnvelopeError::Malformed(_))
        ));
    }

    #[test]
    fn payload_kind_is_checked() {
        let env = sample();
        let err = env.payload::<crate::model::LlmRequest>().unwrap_err();
        assert!(matches!(err, EnvelopeError::WrongKind { .. }));
        assert!(env.payload::<Reply>().is_ok());
    }
}
