//! Telegram's Bot API: `sendMessage` with the bot token in the path. Replies go out as
//! Markdown; when Telegram cannot parse the formatting ("can't parse entities") the same
//! text goes again as plain text. Texts over 4,096 characters are split beforehand.

use hermes_shared::config::TelegramSender;
use hermes_shared::failure::FailureReason;
use secrecy::ExposeSecret;
use serde_json::json;

use crate::retry_policy::{RetryPolicy, SendFailure};

/// The longest text of one Telegram message.
pub const MAX_CHARS: usize = 4096;

/// Sends to Telegram chats.
pub struct Telegram {
    http: reqwest::Client,
    send_message: String,
}

impl Telegram {
    pub fn new(settings: &TelegramSender, http: reqwest::Client) -> Self {
        let base = settings.base_url.as_str().trim_end_matches('/');
        Self {
            http,
            send_message: format!(
                "{base}/bot{}/sendMessage",
                settings.bot_token.expose_secret()
            ),
        }
    }

    /// Send one part (at most [`MAX_CHARS`]) to `chat_id`.
    pub async fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        text: &str,
        mut on_failure: impl FnMut(FailureReason),
    ) -> Result<(), SendFailure> {
        let formatted = json!({ "chat_id": chat_id, "text": text, "parse_mode": "Markdown" });
        let first = policy
            .send(
                || self.http.post(&self.send_message).json(&formatted),
                &mut on_failure,
            )
            .await;
        match first {
            Err(f) if is_formatting_error(&f) => {
                tracing::info!(
                    "Telegram could not parse the reply's formatting; sending it as plain text"
                );
                let plain = json!({ "chat_id": chat_id, "text": text });
                policy
                    .send(
                        || self.http.post(&self.send_message).json(&plain),
                        &mut on_failure,
                    )
                    .await
                    .map(drop)
            }
            other => other.map(drop),
        }
    }
}

/// Telegram answers a bad Markdown reply with 400 "Bad Request: can't parse entities: …".
fn is_formatting_error(f: &SendFailure) -> bool {
    f.reason == FailureReason::InvalidRecipient
        && f.body
            .as_deref()
            .is_some_and(|b| b.contains("can't parse entities"))
}
