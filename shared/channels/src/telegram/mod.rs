//! Telegram, through the Bot API (<https://core.telegram.org/bots/api>): webhook updates in
//! (<https://core.telegram.org/bots/api#setwebhook>), `sendMessage` and friends out.
//!
//! In: [`verify`] checks the secret token of each update, [`parse`] reads one `Update`
//! (<https://core.telegram.org/bots/api#update>), [`groups`] decides whether a group message
//! or an edit is answered, and [`Webhook`] puts them behind [`crate::inbound::Webhook`].
//!
//! Out: [`send`] (`sendMessage`, `sendPhoto`, a group's answer quoting its
//! question), [`format`] (Markdown, and plain text when Telegram cannot parse it),
//! [`drafts`] (an external agent's draft as one message edited as it grows,
//! `editMessageText`), [`errors`] (the refusals Telegram names in its 400 answers),
//! [`limits`], [`media`] (`getFile`) and [`presence`] (the `typing` chat action).

pub mod drafts;
pub mod errors;
pub mod format;
pub mod groups;
pub mod limits;
pub mod media;
pub mod parse;
pub mod presence;
pub mod send;
pub mod verify;
mod webhook;

pub use drafts::{Edited, MessageRef};
pub use format::Format;
pub use limits::LIMITS;
pub use parse::{Update, parse};
pub use send::Telegram;
pub use webhook::Webhook;
