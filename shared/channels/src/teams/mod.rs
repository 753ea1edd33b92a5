//! Microsoft Teams, through the Bot Framework
//! (<https://learn.microsoft.com/en-us/microsoftteams/platform/bots/what-are-bots>).
//!
//! In: [`verify`] checks the Bot Framework's JWT on each request against the signing keys
//! ([`keys`], a JWKS read from a URL or a file and read again as Microsoft rolls them) and
//! ties the activity's `serviceUrl` to the token's claim; [`parse`] reads one activity:
//! personal messages, and mentions of the bot in channels and group chats; [`Webhook`]
//! puts them behind [`crate::inbound::Webhook`]. [`chat`] is where an answer goes: the
//! conversation on its Connector service.
//!
//! Out: [`token`] (the bot's own token, by the OAuth 2.0 client-credentials grant, cached
//! until it expires), [`send`] (the Connector's `POST /v3/conversations/{id}/activities`,
//! <https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-send-and-receive-messages>),
//! [`presence`] (a `typing` activity, which the answer replaces) and [`media`] (files by
//! their pre-authorized URL, inline images with the bot's token). Docs: docs/channels.md,
//! "Microsoft Teams".

pub mod chat;
pub mod keys;
pub mod media;
pub mod parse;
pub mod presence;
pub mod send;
pub mod token;
pub mod verify;
mod webhook;

pub use chat::TeamsChat;
pub use parse::{Request, parse};
pub use send::{LIMITS, Teams};
pub use webhook::Webhook;
