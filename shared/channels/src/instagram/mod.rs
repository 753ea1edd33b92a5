//! Instagram, through Meta's Instagram Messaging API
//! (<https://developers.facebook.com/docs/messenger-platform/instagram>).
//!
//! In: a Meta app's webhook ([`crate::meta`]: signed bodies, the `GET` handshake) whose
//! `entry[].messaging[]` items [`parse`] reads
//! (<https://developers.facebook.com/docs/messenger-platform/instagram/features/webhook>);
//! [`webhook`] registers them behind [`crate::inbound::Webhook`].

pub mod parse;
mod webhook;

pub use parse::parse;
pub use webhook::webhook;
