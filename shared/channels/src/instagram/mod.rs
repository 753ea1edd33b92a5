//! Instagram, through Meta's Instagram Messaging API
//! (<https://developers.facebook.com/docs/messenger-platform/instagram>).
//!
//! In: a Meta app's webhook ([`crate::meta`]: signed bodies, the `GET` handshake) whose
//! `entry[].messaging[]` items [`parse`] reads with the Messenger Platform's parser
//! ([`crate::meta::messaging`], shared with Facebook Messenger)
//! (<https://developers.facebook.com/docs/messenger-platform/instagram/features/webhook>);
//! [`webhook`] registers them behind [`crate::inbound::Webhook`].
//!
//! Out: [`send`] and [`limits`]. Its files come as URLs, fetched as they are
//! (no credential, [`crate::media`]); it has no typing indicator Hermes uses, and its error
//! codes are Meta's ([`crate::meta::errors`]).

pub mod limits;
pub mod send;
mod webhook;

pub use limits::LIMITS;
pub use send::Instagram;
pub use webhook::webhook;

use hermes_types::model::MessageEvent;

use crate::decode::ParseError;
use crate::meta::messaging::{self, Product};

/// An Instagram webhook body's messages to route, in body order (see
/// [`messaging::parse`]).
pub fn parse(body: &[u8]) -> Result<Vec<MessageEvent>, ParseError> {
    messaging::parse(body, Product::Instagram)
}
