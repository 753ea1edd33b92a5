//! Teams' sends: an activity `POST`ed to the conversation on its Connector service
//! (`{serviceUrl}v3/conversations/{id}/activities`, or `…/activities/{id}` to reply to the
//! message that mentioned the bot in a channel), with the bot's token ([`super::token`]).
//! A text goes as `text` in Markdown, which Teams renders; an image as a hero card with its
//! caption. The service's host must be one of `TEAMS_SERVICE_HOSTS`: the token goes nowhere
//! else. A 401 forgets the token and tries once more with a new one.

use std::sync::Arc;

use hermes_config::TeamsSender;
use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use super::chat::TeamsChat;
use super::token::Token;
use crate::{Limits, Outbound, Part, RetryPolicy, SendFailure};

/// One Teams message: Teams takes about 28 KB of activity; 7,000 characters keeps a reply of
/// four-byte characters inside it. A hero card's text is kept shorter.
pub const LIMITS: Limits = Limits {
    max_chars: 7000,
    max_caption: Some(2000),
};

/// Sends as one bot.
pub struct Teams {
    http: reqwest::Client,
    settings: TeamsSender,
    token: Arc<Token>,
}

impl Teams {
    /// The sender of the bot `settings` names, on the stage's client `http`.
    pub fn new(settings: &TeamsSender, http: reqwest::Client) -> Self {
        Self {
            token: Arc::new(Token::new(settings, http.clone())),
            http,
            settings: settings.clone(),
        }
    }

    /// POST `activity` to `chat` (as a reply to `reply_to` when given); the Connector's
    /// answer.
    pub async fn post(
        &self,
        policy: &RetryPolicy,
        chat: &TeamsChat,
        reply_to: Option<&str>,
        activity: &Value,
        mut on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Value, SendFailure> {
        let url = checked_url(&self.settings, chat, reply_to)?;
        let mut renewed = false;
        loop {
            let token = self.token.get(policy).await?;
            let sent = policy
                .send(
                    || {
                        (self.http.post(url.clone()))
                            .bearer_auth(token.expose_secret())
                            .json(activity)
                    },
                    &mut on_failure,
                )
                .await;
            match sent {
                Ok(answer) => return Ok(answer.json().await.unwrap_or(Value::Null)),
                Err(f) if f.status.map(|s| s.as_u16()) == Some(401) && !renewed => {
                    self.token.forget();
                    renewed = true;
                }
                Err(f) => return Err(f),
            }
        }
    }
}

/// Where an activity for `chat` goes, or why it may not go there (parked: it cannot become
/// sendable).
pub(super) fn checked_url(
    settings: &TeamsSender,
    chat: &TeamsChat,
    reply_to: Option<&str>,
) -> Result<url::Url, SendFailure> {
    let refused = |reason, detail: &str| SendFailure {
        reason,
        status: None,
        body: None,
        detail: detail.into(),
        tries: 0,
    };
    if !settings.serves(&chat.service_url) {
        return Err(refused(
            FailureReason::AddressRefused,
            "the conversation's serviceUrl is not on a host of TEAMS_SERVICE_HOSTS",
        ));
    }
    chat.activities_url(reply_to).ok_or_else(|| {
        refused(
            FailureReason::InvalidRecipient,
            "the serviceUrl cannot take a path",
        )
    })
}

/// The conversation of a run's chat id, or the failure of one that is not Teams'.
pub(super) fn chat_of(chat_id: &str) -> Result<TeamsChat, SendFailure> {
    TeamsChat::parse(chat_id).ok_or_else(|| SendFailure {
        reason: FailureReason::InvalidRecipient,
        status: None,
        body: None,
        detail: "the chat id is not a Teams conversation".into(),
        tries: 0,
    })
}

/// The message activity of one part.
fn activity(part: &Part, reply_to: Option<&str>) -> Value {
    let mut a = match part {
        Part::Text(text) => json!({ "type": "message", "textFormat": "markdown", "text": text }),
        Part::Image { url, caption } => json!({
            "type": "message",
            "attachments": [{
                "contentType": "application/vnd.microsoft.card.hero",
                "content": { "text": caption, "images": [{ "url": url }] },
            }],
        }),
    };
    if let Some(id) = reply_to {
        a["replyToId"] = json!(id);
    }
    a
}

impl Outbound for Teams {
    fn platform(&self) -> Platform {
        Platform::Teams
    }

    fn limits(&self) -> Limits {
        LIMITS
    }

    /// Send one part to the conversation of `chat_id`, as a reply to the message `quote`
    /// names when one does (a channel's mention). Returns the activity's id.
    async fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let chat = chat_of(chat_id)?;
        let answer = self
            .post(policy, &chat, quote, &activity(part, quote), on_failure)
            .await?;
        Ok(answer.get("id").and_then(Value::as_str).map(str::to_owned))
    }
}

#[cfg(test)]
mod tests;
