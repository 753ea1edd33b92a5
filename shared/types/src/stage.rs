//! The stages of the pipeline, each with its own work queue, and a message ready to be
//! published to one of them (what the outbox stores and the bus sends).

use std::fmt;

use crate::envelope::Envelope;
use crate::ids::MessageId;

/// A stage of the pipeline, each with its own work queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    Router,
    Llm,
    Tools,
    Delivery,
    Webhooks,
}

impl Stage {
    pub const ALL: [Stage; 5] = [
        Stage::Router,
        Stage::Llm,
        Stage::Tools,
        Stage::Delivery,
        Stage::Webhooks,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Router => "router",
            Stage::Llm => "llm",
            Stage::Tools => "tools",
            Stage::Delivery => "delivery",
            Stage::Webhooks => "webhooks",
        }
    }

    pub fn parse(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether a failure here waits in the retry wait queues before the next attempt
    /// (sends to peers outside the fleet); other stages park what they cannot process.
    pub fn retries_later(self) -> bool {
        matches!(self, Stage::Delivery | Stage::Webhooks)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message ready to publish: where it goes and its encoded envelope.
#[derive(Clone, Debug)]
pub struct Outgoing {
    pub stage: Stage,
    pub message_id: MessageId,
    pub traceparent: Option<String>,
    pub body: Vec<u8>,
}

impl Outgoing {
    pub fn from_envelope(env: &Envelope) -> Self {
        Self {
            stage: env.kind.stage(),
            message_id: env.id,
            traceparent: env.traceparent.as_ref().map(|t| t.to_string()),
            body: env.to_vec(),
        }
    }
}
