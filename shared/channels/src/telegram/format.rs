//! How a Telegram message's text is formatted
//! (<https://core.telegram.org/bots/api#formatting-options>). Replies go out as Markdown;
//! when Telegram cannot parse the formatting ("can't parse entities") the same message goes
//! again as plain text. A draft goes as plain text: a text cut mid-stream often holds half a
//! Markdown entity.

use serde_json::{Value, json};

/// How a text is formatted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Markdown, falling back to plain text when Telegram cannot parse it.
    Markdown,
    /// Plain text only.
    Plain,
}

/// The request body `plain` asking Telegram to read its text as Markdown.
pub(crate) fn as_markdown(plain: &Value) -> Value {
    let mut formatted = plain.clone();
    formatted["parse_mode"] = json!("Markdown");
    formatted
}
