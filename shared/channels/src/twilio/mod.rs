//! SMS (and MMS) through Twilio's Programmable Messaging
//! (<https://www.twilio.com/docs/messaging>). The chat is the sender's phone number.
//!
//! In: [`webhook`] registers `POST /webhooks/twilio` behind [`crate::inbound::Webhook`]:
//! `X-Twilio-Signature` over the configured public URL and the sorted form
//! (<https://www.twilio.com/docs/usage/webhooks/webhooks-security>, [`verify`]), the form
//! read by [`parse`] (<https://www.twilio.com/docs/messaging/guides/webhook-request>): incoming
//! messages, their MMS media, the status callbacks of our sends, and the `STOP` / `START` /
//! `HELP` [`keywords`].
//!
//! Out: [`send`] through the Messages API
//! (<https://www.twilio.com/docs/messaging/api/message-resource>), cut to [`segments`]; its
//! error codes in [`errors`]; MMS files located in [`media`] with the account's basic auth.
//! SMS has no typing indicator and no read receipts to send.

pub mod errors;
pub mod keywords;
pub mod media;
pub mod parse;
pub mod segments;
pub mod send;
pub mod verify;
mod webhook;

pub use send::Sms;
pub use webhook::Webhook;
