//! What ends the run of a parked message: the words its caller or chat is told, the outcome
//! its run closes with, and the failure reply of a message parked on its way to an answer
//! (docs/architecture.md, "4. Poison is parked, never looped"). The stages' parking hooks
//! send or record these; the runtime that parks the message knows none of it.

use crate::envelope::{Envelope, EnvelopeError, MessageKind};
use crate::ids::MessageId;
use crate::model::{FailureCode, ForgePreflight, Inbound, LlmRequest, Outcome, Reply, ToolRequest};

/// What the user is told when their message could not be processed.
pub const PARKED_TEXT: &str =
    "Sorry, something went wrong with this message and I couldn't answer it. Please try again.";

/// Bits flipped in a parked message's id to name its failure reply (stable, so two copies
/// of one parked message make one reply).
const FAILURE_REPLY_ID: u128 = 0x7061_726b_6564_2d72_6570_6c79_0000_0001;

/// The outcome a parked message's run closes with.
pub fn parked_outcome() -> Outcome {
    Outcome::Failed {
        code: FailureCode::Invalid,
        message: PARKED_TEXT.into(),
    }
}

/// The failure reply that ends the run of `parked`, a message parked on its way to an
/// answer (an inbound message, a model request, a tool request), for the delivery stage to
/// close the run as failed, refund it once and tell its caller or chat. Its id is derived
/// from the parked message's, so two parked copies of one message make one reply. `None`
/// for the other kinds: a reply or a wake is closed where it is parked, and a memory
/// extraction, a dream or a draft update leaves nothing open.
pub fn failure_reply(parked: &Envelope) -> Result<Option<Envelope>, EnvelopeError> {
    let (reply_to, exchange) = match parked.kind {
        MessageKind::Inbound => (parked.payload::<Inbound>()?.reply_to(), None),
        MessageKind::LlmRequest => {
            let req = parked.payload::<LlmRequest>()?;
            (req.reply_to, req.exchange)
        }
        MessageKind::ToolRequest => {
            let req = parked.payload::<ToolRequest>()?.request;
            (req.reply_to, req.exchange)
        }
        MessageKind::ForgePreflight => {
            let req = parked.payload::<ForgePreflight>()?.request;
            (req.reply_to, req.exchange)
        }
        MessageKind::Reply
        | MessageKind::AgentWake
        | MessageKind::MemoryExtract
        | MessageKind::Dream
        | MessageKind::DraftUpdate
        | MessageKind::ForgeAnswer => return Ok(None),
    };
    let reply = Reply {
        exchange,
        ..Reply::failed(reply_to, FailureCode::Invalid, PARKED_TEXT)
    };
    let mut env = parked.follow(&reply);
    env.id = MessageId::derived(parked.id.as_uuid(), FAILURE_REPLY_ID);
    Ok(Some(env))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::RunId;
    use serde_json::json;

    fn llm_request() -> LlmRequest {
        serde_json::from_value(json!({
            "reply_to": {"platform": "telegram", "chat_id": "42"},
            "tier": "free",
            "chain": ["mock"],
            "messages": [{"role": "user", "content": "hello"}]
        }))
        .expect("a minimal llm request")
    }

    #[test]
    fn a_parked_request_gets_one_failure_reply_to_its_chat() {
        let parked = Envelope::new(RunId::new(), None, &llm_request());
        let reply = failure_reply(&parked).unwrap().expect("a failure reply");
        assert_eq!(reply.run_id, parked.run_id);
        assert_eq!(reply.kind, MessageKind::Reply);
        let body: Reply = reply.payload().unwrap();
        assert_eq!(body.reply_to.chat_id, "42");
        assert_eq!(body.outcome, parked_outcome());
        // A second copy of the parked message names the same reply; another message does not.
        let again = failure_reply(&parked).unwrap().unwrap();
        assert_eq!(again.id, reply.id);
        assert_ne!(reply.id, parked.id);
        let other = Envelope::new(parked.run_id, None, &llm_request());
        assert_ne!(failure_reply(&other).unwrap().unwrap().id, reply.id);
    }

    #[test]
    fn a_tool_request_is_answered_where_its_model_request_would_be() {
        let tools = ToolRequest {
            request: llm_request(),
            calls: Vec::new(),
            decisions: Vec::new(),
            results: Vec::new(),
        };
        let parked = Envelope::new(RunId::new(), None, &tools);
        let body: Reply = failure_reply(&parked).unwrap().unwrap().payload().unwrap();
        assert_eq!(body.reply_to.chat_id, "42");
    }

    #[test]
    fn a_parked_reply_gets_no_reply_and_a_garbled_request_is_an_error() {
        let reply = Reply::failed(
            llm_request().reply_to,
            FailureCode::Invalid,
            "already failed",
        );
        let parked = Envelope::new(RunId::new(), None, &reply);
        assert!(failure_reply(&parked).unwrap().is_none());
        let mut garbled = Envelope::new(RunId::new(), None, &llm_request());
        garbled.payload = json!({"nonsense": true});
        assert!(failure_reply(&garbled).is_err());
    }
}
