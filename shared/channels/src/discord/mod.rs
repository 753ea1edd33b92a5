//! Discord, through interactions over HTTP
//! (<https://discord.com/developers/docs/interactions/overview>).
//!
//! In: [`verify`] checks the Ed25519 signature Discord puts on every request to the
//! interactions endpoint, on the raw bytes before they are parsed; [`parse`] reads one
//! interaction: a `PING`, or a slash command to route. The route, its answers (a `PONG`, a
//! deferred response) and the follow-up sends are not wired yet (docs/channels.md will have
//! the section when they are).

pub mod parse;
pub mod verify;

pub use parse::{Command, Interaction, parse};
