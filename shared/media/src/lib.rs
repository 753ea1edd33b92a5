//! hermes-media: the files people send on chat platforms, made usable by the stage that
//! needs their bytes (docs/channels.md, media). A platform's file is named by a reference
//! ([`hermes_types::model::MediaRef`]) in every queued message; [`fetch::MediaFetcher`]
//! locates it with the platform's credentials through `hermes_channels::media` (Telegram
//! `getFile`, Meta's media API, an Instagram URL as is, each in its platform's folder),
//! downloads it through the SSRF guard within a size limit and one
//! deadline, and checks that its bytes are the type it claims. [`transcribe::Transcriber`]
//! turns a voice note into text through an OpenAI-compatible endpoint. The bytes live only
//! in the memory of the call that needs them.
//!
//! Credentials stay out of every error and log line: a Telegram file URL holds the bot
//! token, so no URL this crate requests is ever shown, only the platform's name
//! (docs/security.md).

pub mod error;
pub mod fetch;
pub mod sniff;
pub mod transcribe;

pub use error::{MediaError, Outcome};
pub use fetch::{Fetched, MediaFetcher, Want};
pub use transcribe::Transcriber;
