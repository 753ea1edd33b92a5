//! Discord, through interactions over HTTP
//! (<https://discord.com/developers/docs/interactions/overview>).
//!
//! In: [`verify`] checks the Ed25519 signature Discord puts on every request to the
//! interactions endpoint, on the raw bytes before they are parsed; [`parse`] reads one
//! interaction: a `PING`, or a slash command to route; [`Webhook`] puts them behind
//! [`crate::inbound::Webhook`] and answers each in the response body (a `PONG`, or a deferred
//! response while the command runs). [`message`] reads a `MESSAGE_CREATE` the Gateway
//! connector (`hermes discord-gateway`) receives: a direct message, or a guild message that
//! addresses the bot.
//!
//! Out: [`send`] answers a command on its interaction's token (the deferred response edited,
//! follow-ups for the rest), or in the channel with the bot token once the token has expired;
//! [`buckets`] paces every request by Discord's rate-limit headers; [`errors`] reads
//! Discord's error codes; [`limits`] is its message size. [`presence`] shows the bot typing
//! for a message the Gateway connector received; a slash command needs nothing, its
//! deferred response shows the bot thinking until the answer replaces it. Docs:
//! docs/channels.md, "Discord".

pub mod buckets;
pub mod errors;
pub mod limits;
pub mod message;
pub mod parse;
pub mod presence;
pub mod send;
pub mod verify;
mod webhook;

pub use limits::LIMITS;
pub use message::{BotId, Message, Skipped, parse_message};
pub use parse::{Command, Interaction, parse};
pub use send::Discord;
pub use webhook::{ACK_WITHIN, Response, Webhook};
