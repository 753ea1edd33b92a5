//! Telegram, through the Bot API (<https://core.telegram.org/bots/api>): webhook updates in
//! (<https://core.telegram.org/bots/api#setwebhook>), `sendMessage` and friends out.
//!
//! The outbound side: [`send`] (`sendMessage`, `sendPhoto`, a group's answer quoting its
//! question), [`format`] (Markdown, and plain text when Telegram cannot parse it),
//! [`drafts`] (an external agent's draft as one message edited as it grows,
//! `editMessageText`), [`errors`] (the refusals Telegram names in its 400 answers),
//! [`limits`], [`media`] (`getFile`) and [`presence`] (the `typing` chat action).

pub mod drafts;
pub mod errors;
pub mod format;
pub mod limits;
pub mod media;
pub mod presence;
pub mod send;

pub use drafts::{Edited, MessageRef};
pub use format::Format;
pub use limits::LIMITS;
pub use send::Telegram;
