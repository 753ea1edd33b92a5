//! Facebook Messenger, a Facebook Page's inbox, through Meta's Messenger Platform
//! (<https://developers.facebook.com/docs/messenger-platform>). The chat is the person's
//! page-scoped id (PSID).
//!
//! In: a Meta app's webhook ([`crate::meta`]: `X-Hub-Signature-256`, the `GET` handshake)
//! with `object: page`, whose `entry[].messaging[]` items the Messenger Platform's parser reads
//! ([`crate::meta::messaging`], shared with Instagram); [`webhook`] registers it.
//!
//! Out: [`send`] through the Send API ([`crate::meta::send_api`], shared with Instagram):
//! `messaging_type: RESPONSE` inside the 24-hour standard messaging window, a configured
//! message tag outside it
//! (<https://developers.facebook.com/docs/messenger-platform/policy/policy-overview#24hours_window>);
//! sender actions (`mark_seen`, `typing_on`) in [`presence`]. Its files come as URLs, fetched
//! as they are, and its error codes are Meta's ([`crate::meta::errors`]).

pub mod presence;
pub mod send;
mod webhook;

pub use send::{LIMITS, Messenger};
pub use webhook::webhook;

use hermes_types::model::MessageEvent;

use crate::decode::ParseError;
use crate::meta::messaging::{self, Product};

/// A Messenger webhook body's messages to route, in body order (see [`messaging::parse`]).
pub fn parse(body: &[u8]) -> Result<Vec<MessageEvent>, ParseError> {
    messaging::parse(body, Product::Messenger)
}
