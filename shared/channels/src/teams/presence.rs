//! Teams' presence: a `typing` activity in the conversation
//! (<https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-activities#typing-activity>).
//! Teams shows it for a few seconds, or until the bot's next message replaces it, so it is
//! renewed every [`TYPING_EVERY`] while the work goes on.
//!
//! It goes with the bot's token like a reply. The call is built without waiting, so with no
//! token held yet (the process's first run) this call is skipped and a fetch started; the
//! renewal a few seconds later carries it.

use std::sync::Arc;
use std::time::Duration;

use hermes_config::TeamsSender;
use reqwest::RequestBuilder;
use secrecy::ExposeSecret;
use serde_json::json;

use super::TeamsChat;
use super::send::checked_url;
use super::token::Token;
use crate::RetryPolicy;

/// How often the typing activity is renewed.
pub const TYPING_EVERY: Duration = Duration::from_secs(3);

/// The typing activity of the configured bot.
pub struct Typing {
    settings: TeamsSender,
    token: Arc<Token>,
}

impl Typing {
    /// The bot `settings` names, with a token of its own.
    pub fn new(settings: &TeamsSender) -> Self {
        Self {
            settings: settings.clone(),
            token: Arc::new(Token::new(settings, super::token::client())),
        }
    }

    /// The typing activity in the conversation of `chat_id`; `None` when it is not a Teams
    /// conversation on a listed host, or no token is held yet.
    pub fn request(&self, http: &reqwest::Client, chat_id: &str) -> Option<RequestBuilder> {
        let chat = TeamsChat::parse(chat_id)?;
        let url = checked_url(&self.settings, &chat, None).ok()?;
        let Some(token) = self.token.current() else {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let token = Arc::clone(&self.token);
                runtime.spawn(async move { token.get(&RetryPolicy::default()).await });
            }
            return None;
        };
        Some(
            http.post(url)
                .bearer_auth(token.expose_secret())
                .json(&json!({ "type": "typing" })),
        )
    }
}
