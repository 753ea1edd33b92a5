//! Discord, through interactions over HTTP
//! (<https://discord.com/developers/docs/interactions/overview>).
//!
//! In: [`verify`] checks the Ed25519 signature Discord puts on every request to the
//! interactions endpoint, on the raw bytes before they are parsed; [`parse`] reads one
//! interaction: a `PING`, or a slash command to route; [`Webhook`] puts them behind
//! [`crate::inbound::Webhook`] and answers each in the response body (a `PONG`, or a deferred
//! response while the command runs).
//!
//! Out: the answer as a follow-up on the interaction's token, and channel messages through
//! the REST API, are not in this version: a Discord reply is parked with that reason
//! ([`crate::outbound::how_to_enable`]). Docs: docs/channels.md, "Discord".

pub mod parse;
pub mod verify;
mod webhook;

pub use parse::{Command, Interaction, parse};
pub use webhook::{ACK_WITHIN, Response, Webhook};
