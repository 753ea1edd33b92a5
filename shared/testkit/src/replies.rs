//! Replies as the llm stage hands them to delivery, for tests that start at delivery.

use hermes_types::model::{Outcome, Reply, ReplyTo, Usage};

/// A model's answer `text` to the chat `to`, with nothing else set.
pub fn answered(to: ReplyTo, text: &str) -> Reply {
    Reply {
        reply_to: to,
        outcome: Outcome::Answered {
            text: text.into(),
            model: "mock".into(),
            usage: Usage::default(),
            finish_reason: "stop".into(),
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
