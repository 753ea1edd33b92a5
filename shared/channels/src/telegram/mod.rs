//! Telegram, through the Bot API (<https://core.telegram.org/bots/api>): webhook updates in
//! (<https://core.telegram.org/bots/api#setwebhook>), `sendMessage` and friends out.
//!
//! In: [`verify`] checks the secret token of each update, [`parse`] reads one `Update`
//! (<https://core.telegram.org/bots/api#update>), [`groups`] decides whether a group message
//! or an edit is answered, and [`Webhook`] puts them behind [`crate::inbound::Webhook`].

pub mod groups;
pub mod parse;
pub mod verify;
mod webhook;

pub use parse::{Update, parse};
pub use webhook::Webhook;
