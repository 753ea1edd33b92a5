//! WhatsApp, through Meta's Cloud API
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api>) or 360dialog, which relays the
//! same payloads (<https://docs.360dialog.com/docs/waba-messaging>).
//!
//! In: one payload, two routes. The Cloud API signs it as every Meta webhook is
//! ([`crate::meta`]); 360dialog does not, and carries our token instead ([`verify`]).
//! [`parse`] reads the payload's messages
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples>) and
//! [`statuses`] its delivery receipts; [`cloud_webhook`] and [`D360Webhook`] put them behind
//! [`crate::inbound::Webhook`].

pub mod parse;
pub mod statuses;
pub mod verify;
mod webhook;

pub use parse::{Batch, parse};
pub use webhook::{D360Webhook, cloud_webhook};
