//! Telegram's Bot API: `sendMessage` and `sendPhoto` with the bot token in the path.
//! Replies go out as Markdown; when Telegram cannot parse the formatting ("can't parse
//! entities") the same message goes again as plain text. Texts over 4,096 characters are
//! split beforehand; photo captions hold 1,024.

use hermes_config::TelegramSender;
use hermes_net::failure::FailureReason;
use secrecy::ExposeSecret;
use serde_json::json;

use super::Part;
use crate::retry_policy::{RetryPolicy, SendFailure};

/// The longest text of one Telegram message.
pub const MAX_CHARS: usize = 4096;
/// The longest caption of a Telegram photo.
pub const MAX_CAPTION: usize = 1024;

/// Sends to Telegram chats.
pub struct Telegram {
    http: reqwest::Client,
    send_message: String,
    send_photo: String,
}

impl Telegram {
    pub fn new(settings: &TelegramSender, http: reqwest::Client) -> Self {
        let base = settings.base_url.as_str().trim_end_matches('/');
        let token = settings.bot_token.expose_secret();
        Self {
            http,
            send_message: format!("{base}/bot{token}/sendMessage"),
            send_photo: format!("{base}/bot{token}/sendPhoto"),
        }
    }

    /// Send one part to `chat_id`: a text of at most [`MAX_CHARS`], or a photo by URL.
    pub async fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        mut on_failure: impl FnMut(FailureReason),
    ) -> Result<(), SendFailure> {
        let (url, plain) = match part {
            Part::Text(text) => (
                &self.send_message,
                json!({ "chat_id": chat_id, "text": text }),
            ),
            Part::Image { url, caption } => {
                let mut body = json!({ "chat_id": chat_id, "photo": url });
                if let Some(c) = caption {
                    body["caption"] = json!(c);
                }
                (&self.send_photo, body)
            }
        };
        if matches!(part, Part::Image { caption: None, .. }) {
            // Nothing to format.
            return policy
                .send(|| self.http.post(url).json(&plain), on_failure)
                .await
                .map(drop);
        }
        let mut formatted = plain.clone();
        formatted["parse_mode"] = json!("Markdown");
        let first = policy
            .send(|| self.http.post(url).json(&formatted), &mut on_failure)
            .await;
        match first {
            Err(f) if is_formatting_error(&f) => {
                tracing::info!(
                    "Telegram could not parse the reply's formatting; sending it as plain text"
                );
                policy
                    .send(|| self.http.post(url).json(&plain), &mut on_failure)
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
