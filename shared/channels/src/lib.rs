//! The chat platforms, one folder each (docs/development.md, "Adding a chat platform").
//!
//! Everything a platform does differently lives in its folder: how its webhooks are
//! verified and parsed, how a reply is sent and split to its limits, where its files are
//! fetched from, how it shows presence, what its statuses and error codes mean, and its
//! configuration section. Ingest, delivery, media and presence stay generic: they call a
//! platform only through the traits in this crate's root, and find it by [`Platform`].
//!
//! The inbound side: [`inbound`] (the [`inbound::Webhook`] trait and its registration),
//! [`limits`], [`decode`] and the lenient readers every parser shares, [`statuses`],
//! [`token`] (shared secrets), and [`meta`] (what WhatsApp and Instagram share as webhooks
//! of a Meta app).
//!
//! The outbound side: [`outbound`] (the [`Outbound`] trait every sender implements, the
//! [`Sender`] enum over the platforms and its one registration, [`Senders`]), [`retry`] (one
//! request's in-call retries and the classified [`SendFailure`]), [`parts`] and [`split`]
//! (what a reply's text becomes within a platform's [`Limits`]), [`media`] (where a platform
//! keeps a file) and [`presence`] (the call that shows a person their message is being
//! answered). Meta's error table, shared by WhatsApp and Instagram, is in [`meta`]. [`drafts`]
//! is the one handle on every platform that shows drafts.
//!
//! [`Platform`]: hermes_types::model::Platform

pub mod decode;
pub mod discord;
pub mod drafts;
mod fields;
pub mod inbound;
pub mod instagram;
pub mod limits;
mod markdown;
pub mod media;
pub mod messenger;
pub mod meta;
pub mod outbound;
pub mod parts;
pub mod presence;
pub mod rest;
pub mod retry;
pub mod slack;
pub mod split;
pub mod statuses;
pub mod teams;
pub mod telegram;
pub mod token;
pub mod twilio;
pub mod whatsapp;

pub use decode::ParseError;
pub use drafts::{DraftMessage, Drafts};
pub use limits::{
    Limits, MAX_ATTACHMENTS, MAX_FIELD_BYTES, MAX_ITEMS, MAX_TEXT_BYTES, truncate_utf8,
};
pub use outbound::{Outbound, Sender, Senders, ShowsDrafts};
pub use parts::Part;
pub use retry::{RetryPolicy, SendFailure};
