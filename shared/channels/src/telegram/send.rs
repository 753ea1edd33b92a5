//! Telegram's Bot API sends: `sendMessage` and `sendPhoto`
//! (<https://core.telegram.org/bots/api#sendmessage>, <https://core.telegram.org/bots/api#sendphoto>)
//! with the bot token in the path. A group's answer quotes the question
//! (`reply_parameters`, <https://core.telegram.org/bots/api#replyparameters>). Texts over
//! 4,096 characters are split beforehand ([`super::LIMITS`]); photo captions hold 1,024.
//! Replies go out as Markdown, again as plain text when Telegram cannot parse it
//! ([`super::format`]).

use hermes_config::TelegramSender;
use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use super::drafts::{MessageRef, message_id};
use super::errors::{Refusal, refused};
use super::format::{Format, as_markdown};
use crate::{Limits, Outbound, Part, RetryPolicy, SendFailure};

/// Sends to Telegram chats.
pub struct Telegram {
    http: reqwest::Client,
    send_message: String,
    send_photo: String,
    pub(super) edit_message: String,
}

impl Telegram {
    /// The sender of the bot `settings` names, on the stage's client `http`.
    pub fn new(settings: &TelegramSender, http: reqwest::Client) -> Self {
        let base = settings.base_url.as_str().trim_end_matches('/');
        let token = settings.bot_token.expose_secret();
        Self {
            http,
            send_message: format!("{base}/bot{token}/sendMessage"),
            send_photo: format!("{base}/bot{token}/sendPhoto"),
            edit_message: format!("{base}/bot{token}/editMessageText"),
        }
    }

    /// Send a text of at most [`super::LIMITS`]`.max_chars` and return the message's id, so
    /// it can be edited.
    pub async fn send_text(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        text: &str,
        format: Format,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<MessageRef, SendFailure> {
        let body = json!({ "chat_id": chat_id, "text": text });
        let answer = self
            .post(policy, &self.send_message, body, format, on_failure)
            .await?;
        message_id(&answer).ok_or_else(|| SendFailure {
            reason: FailureReason::InvalidRecipient,
            status: None,
            body: None,
            detail: "Telegram accepted the message but named no result.message_id".into(),
            tries: 1,
        })
    }

    /// POST `plain` to `url` (as Markdown first when `format` asks, then plain if Telegram
    /// cannot parse it); Telegram's JSON answer.
    pub(super) async fn post(
        &self,
        policy: &RetryPolicy,
        url: &str,
        plain: Value,
        format: Format,
        mut on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Value, SendFailure> {
        let sent = match format {
            Format::Plain => {
                policy
                    .send(|| self.http.post(url).json(&plain), &mut on_failure)
                    .await
            }
            Format::Markdown => {
                let formatted = as_markdown(&plain);
                match policy
                    .send(|| self.http.post(url).json(&formatted), &mut on_failure)
                    .await
                {
                    Err(f) if refused(&f, Refusal::CantParseEntities) => {
                        tracing::info!(
                            "Telegram could not parse the reply's formatting; sending it as plain text"
                        );
                        policy
                            .send(|| self.http.post(url).json(&plain), &mut on_failure)
                            .await
                    }
                    other => other,
                }
            }
        }?;
        // The answer's body only matters for a sent message's id; a body that is not JSON
        // reads as none.
        Ok(sent.json().await.unwrap_or(Value::Null))
    }
}

impl Outbound for Telegram {
    fn platform(&self) -> Platform {
        Platform::Telegram
    }

    fn limits(&self) -> Limits {
        super::LIMITS
    }

    /// Send one part to `chat_id`: a text of at most [`super::LIMITS`]`.max_chars`, or a
    /// photo by URL; as a reply to the message `quote` when one is given (sent anyway if that
    /// message is gone). Returns the message's id (`result.message_id`) when Telegram names it.
    async fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let (url, mut plain) = match part {
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
        if let Some(message_id) = quote.and_then(|q| q.trim().parse::<i64>().ok()) {
            plain["reply_parameters"] =
                json!({ "message_id": message_id, "allow_sending_without_reply": true });
        }
        // A photo without a caption has nothing to format.
        let format = match part {
            Part::Image { caption: None, .. } => Format::Plain,
            _ => Format::Markdown,
        };
        self.post(policy, url, plain, format, on_failure)
            .await
            .map(|answer| message_id(&answer).map(MessageRef::to_stored))
    }
}

/// A sender of the bot `1:t` at `server`, for the tests of this folder.
#[cfg(test)]
pub(super) fn for_tests(server: &wiremock::MockServer) -> Telegram {
    hermes_net::install_crypto_provider();
    let settings = TelegramSender {
        bot_token: secrecy::SecretString::from("1:t".to_string()),
        base_url: server.uri().parse().unwrap(),
    };
    Telegram::new(&settings, reqwest::Client::new())
}

#[cfg(test)]
mod tests {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    #[tokio::test]
    async fn a_quoted_part_replies_to_its_message_and_a_plain_one_does_not() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/bot1:t/sendMessage"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
            .mount(&server)
            .await;
        let tg = for_tests(&server);
        let part = Part::Text("hi".into());
        tg.send(&RetryPolicy::fast(), "-100", &part, Some("501"), |_| {})
            .await
            .unwrap();
        tg.send(&RetryPolicy::fast(), "-100", &part, None, |_| {})
            .await
            .unwrap();
        // Not a Telegram message id: sent without a quote rather than refused.
        tg.send(&RetryPolicy::fast(), "-100", &part, Some("wamid.1"), |_| {})
            .await
            .unwrap();
        let bodies: Vec<Value> = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect();
        assert_eq!(
            bodies[0]["reply_parameters"],
            json!({"message_id": 501, "allow_sending_without_reply": true})
        );
        assert!(bodies[1].get("reply_parameters").is_none());
        assert!(bodies[2].get("reply_parameters").is_none());
    }
}
