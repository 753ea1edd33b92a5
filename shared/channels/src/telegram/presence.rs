//! Telegram's presence: the `typing` chat action
//! (<https://core.telegram.org/bots/api#sendchataction>), which Telegram shows for 5 s or
//! until a message arrives, so it is renewed every [`TYPING_EVERY`] while the work goes on.

use std::time::Duration;

use hermes_config::TelegramSender;
use reqwest::RequestBuilder;
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

/// How often Telegram's typing action is renewed (Telegram shows it for 5 s).
pub const TYPING_EVERY: Duration = Duration::from_secs(4);

/// The `sendChatAction` endpoint of the configured bot.
pub struct Typing {
    /// `{base}/bot{token}/sendChatAction`: holds the token, so it is never logged.
    url: SecretString,
}

impl Typing {
    /// The endpoint of the bot `settings` names.
    pub fn new(settings: &TelegramSender) -> Self {
        Self {
            url: SecretString::from(format!(
                "{}/bot{}/sendChatAction",
                settings.base_url.as_str().trim_end_matches('/'),
                settings.bot_token.expose_secret()
            )),
        }
    }

    /// The `typing` action in `chat`.
    pub fn request(&self, http: &reqwest::Client, chat: &str) -> RequestBuilder {
        http.post(self.url.expose_secret())
            .json(&json!({"chat_id": chat, "action": "typing"}))
    }
}
