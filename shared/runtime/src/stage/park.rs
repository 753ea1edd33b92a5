//! Telling a stage its message was parked (docs/architecture.md, "4. Poison is parked, never
//! looped"). What a parked message leaves behind (an open run, a spent credit, a caller
//! waiting) is its stage's business, so the stage loop only calls the handler's
//! [`Handler::on_parked`] with the [`ParkCause`] and publishes, with confirms, the messages
//! the hook asks for. Best effort: the message is parked either way; what the hook cannot do
//! now is left to the stage's own backstop (for runs, the router's stuck-run sweeper).

use std::fmt;

use hermes_net::failure::FailureReason;
use hermes_types::envelope::Envelope;

use super::Handler;
use crate::context::Ctx;

/// Why a message was parked, as its handler is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParkCause {
    /// It failed on its own on the last delivery its queue allows.
    DeliveryLimit,
    /// It can never be processed ([`super::StageError::Poison`]).
    Poison,
    /// A send to a peer outside the fleet failed for good: a permanent failure, or the
    /// retry schedule used up ([`super::StageError::Retry`]).
    SendFailed(FailureReason),
}

impl ParkCause {
    /// The cause's name: `delivery_limit`, `poison`, or the send's failure reason.
    pub fn as_str(self) -> &'static str {
        match self {
            ParkCause::DeliveryLimit => "delivery_limit",
            ParkCause::Poison => "poison",
            ParkCause::SendFailed(reason) => reason.as_str(),
        }
    }
}

impl fmt::Display for ParkCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tell `handler` that `env` was parked for `cause`, and publish what it asks for.
pub(super) async fn tell<H: Handler>(ctx: &Ctx, handler: &H, env: &Envelope, cause: ParkCause) {
    let next = match handler.on_parked(env, cause).await {
        Ok(next) => next,
        Err(e) => {
            tracing::error!(%cause, error = %format!("{e:#}"), "the stage could not finish with its parked message now; its backstop will");
            return;
        }
    };
    for message in &next {
        match ctx.bus.publish(message).await {
            Ok(()) => {
                tracing::warn!(%cause, message_id = %message.id, kind = ?message.kind, "message parked: its stage's follow-up published");
            }
            Err(e) => {
                tracing::error!(%cause, message_id = %message.id, error = %e, "cannot publish what the parked message's stage asked for; its backstop will");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_is_named_as_parked_messages_report_it() {
        assert_eq!(ParkCause::DeliveryLimit.as_str(), "delivery_limit");
        assert_eq!(ParkCause::Poison.to_string(), "poison");
        assert_eq!(
            ParkCause::SendFailed(FailureReason::NoSender).as_str(),
            FailureReason::NoSender.as_str()
        );
    }
}
