//! What the connector does with a `MESSAGE_CREATE`: read it ([`parse_message`]), then
//! accept it exactly as ingest accepts a webhook's message ([`hermes_runtime::accept`]):
//! deduplicated by Discord's message id, the sender's rate checked, published to the router
//! with a broker confirm. Only a confirmed (or deduplicated, or skipped) message is handled.

use hermes_channels::discord::{BotId, Message, parse_message};
use hermes_runtime::accept::{self, Accepted};

use crate::Shared;

/// The broker did not take the message: it is not handled, and must be asked for again.
#[derive(Debug, PartialEq, Eq)]
pub struct Unconfirmed;

/// Handle the `d` of one `MESSAGE_CREATE` for `bot`.
pub async fn message(shared: &Shared, bot: Option<&BotId>, d: &str) -> Result<(), Unconfirmed> {
    let events = &shared.metrics.events;
    // Discord sends READY first; a message before it cannot be told from the bot's own.
    let Some(bot) = bot else {
        events.with_label_values(&["invalid"]).inc();
        return Ok(());
    };
    let inbound = match parse_message(d.as_bytes(), bot) {
        Ok(Message::Routed(m)) => m,
        Ok(Message::Skipped(why)) => {
            events.with_label_values(&[why.as_str()]).inc();
            return Ok(());
        }
        Err(e) => {
            // The reason only: a message's text is the sender's, not the log's.
            tracing::warn!(
                reason = e.reason(),
                "a MESSAGE_CREATE that could not be read: skipped"
            );
            events.with_label_values(&["invalid"]).inc();
            return Ok(());
        }
    };
    let outcome = match accept::accept(&shared.intake, *inbound, None).await {
        Ok(Accepted::Routed(_)) => "accepted",
        Ok(Accepted::Duplicate(_)) => "duplicate",
        Ok(Accepted::Delayed(_)) => "delayed",
        // Only API and REST callers are refused for their rate; a chat message never is.
        Ok(Accepted::RateLimited { .. }) => "rate_limited",
        Err(_) => {
            events.with_label_values(&["unconfirmed"]).inc();
            return Err(Unconfirmed);
        }
    };
    events.with_label_values(&[outcome]).inc();
    Ok(())
}
