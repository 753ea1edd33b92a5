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
//!
//! Out: [`auth`] (the credential of either provider on every request),
//! [`send`] (text, image by link, template), [`templates`] (an approved template filled for
//! a reply outside the 24-hour window), [`window`] (that window's rule), [`limits`], [`media`] (Meta's media API, or
//! 360dialog's proxy of it) and [`presence`] (read receipt and typing indicator in one
//! call). Its error codes are Meta's ([`crate::meta::errors`]).

pub mod auth;
pub mod limits;
pub mod media;
pub mod parse;
pub mod presence;
pub mod send;
pub mod statuses;
pub mod templates;
pub mod verify;
mod webhook;
pub mod window;

pub use limits::LIMITS;
pub use parse::{Batch, parse};
pub use send::Whatsapp;
pub use templates::TemplateMessage;
pub use webhook::{D360Webhook, cloud_webhook};
