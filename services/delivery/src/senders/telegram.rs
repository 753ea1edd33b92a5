//! Telegram's Bot API: `sendMessage` and `sendPhoto` with the bot token in the path, and
//! `editMessageText` for an external agent's draft (docs/agents.md, "How drafts are shown").
//! A group's answer quotes the question (`reply_parameters`). Replies go out as Markdown; when Telegram cannot parse the formatting ("can't parse
//! entities") the same message goes again as plain text. Texts over 4,096 characters are
//! split beforehand; photo captions hold 1,024. A draft goes as plain text: a text cut
//! mid-stream often holds half a Markdown entity.

use hermes_config::TelegramSender;
use hermes_net::failure::FailureReason;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use super::Part;
use crate::retry_policy::{RetryPolicy, SendFailure};

/// The longest text of one Telegram message.
pub const MAX_CHARS: usize = 4096;
/// The longest caption of a Telegram photo.
pub const MAX_CAPTION: usize = 1024;

/// How a text is formatted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Markdown, falling back to plain text when Telegram cannot parse it.
    Markdown,
    /// Plain text only.
    Plain,
}

/// The message id Telegram gave a sent message (`result.message_id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageRef(pub i64);

impl MessageRef {
    /// The id as kept in `agent_drafts.platform_message_id`.
    pub fn to_stored(self) -> String {
        self.0.to_string()
    }

    /// The id from `agent_drafts.platform_message_id`; `None` if it is not Telegram's.
    pub fn from_stored(s: &str) -> Option<Self> {
        s.trim().parse().ok().map(Self)
    }
}

/// What an edit did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edited {
    /// The message now shows the new text.
    Changed,
    /// It showed that text already ("message is not modified"): not a failure.
    Unchanged,
}

/// Sends to Telegram chats.
pub struct Telegram {
    http: reqwest::Client,
    send_message: String,
    send_photo: String,
    edit_message: String,
}

impl Telegram {
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

    /// Send one part to `chat_id`: a text of at most [`MAX_CHARS`], or a photo by URL; as
    /// a reply to the message `quote` when one is given (sent anyway if that message is
    /// gone). Returns the message's id (`result.message_id`) when Telegram names it.
    pub async fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        quote: Option<&str>,
        on_failure: impl FnMut(FailureReason),
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

    /// Send a text of at most [`MAX_CHARS`] and return the message's id, so it can be edited.
    pub async fn send_text(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        text: &str,
        format: Format,
        on_failure: impl FnMut(FailureReason),
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

    /// Replace the text of message `message` in `chat_id` (at most [`MAX_CHARS`]).
    pub async fn edit_text(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        message: MessageRef,
        text: &str,
        format: Format,
        on_failure: impl FnMut(FailureReason),
    ) -> Result<Edited, SendFailure> {
        let body = json!({ "chat_id": chat_id, "message_id": message.0, "text": text });
        match self
            .post(policy, &self.edit_message, body, format, on_failure)
            .await
        {
            Ok(_) => Ok(Edited::Changed),
            Err(f) if says(&f, "message is not modified") => Ok(Edited::Unchanged),
            Err(f) => Err(f),
        }
    }

    /// POST `plain` to `url` (as Markdown first when `format` asks, then plain if Telegram
    /// cannot parse it); Telegram's JSON answer.
    async fn post(
        &self,
        policy: &RetryPolicy,
        url: &str,
        plain: Value,
        format: Format,
        mut on_failure: impl FnMut(FailureReason),
    ) -> Result<Value, SendFailure> {
        let sent = match format {
            Format::Plain => {
                policy
                    .send(|| self.http.post(url).json(&plain), &mut on_failure)
                    .await
            }
            Format::Markdown => {
                let mut formatted = plain.clone();
                formatted["parse_mode"] = json!("Markdown");
                match policy
                    .send(|| self.http.post(url).json(&formatted), &mut on_failure)
                    .await
                {
                    Err(f) if says(&f, "can't parse entities") => {
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

/// Whether Telegram refused a request (400) saying `what`, e.g. "can't parse entities" for
/// bad Markdown or "message is not modified" for an edit to the same text.
pub fn says(f: &SendFailure, what: &str) -> bool {
    f.reason == FailureReason::InvalidRecipient
        && f.body.as_deref().is_some_and(|b| b.contains(what))
}

/// `result.message_id` of Telegram's answer to a send.
fn message_id(answer: &Value) -> Option<MessageRef> {
    answer
        .get("result")?
        .get("message_id")?
        .as_i64()
        .map(MessageRef)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use secrecy::SecretString;
    use wiremock::matchers::{body_partial_json, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn telegram(server: &MockServer) -> Telegram {
        hermes_net::install_crypto_provider();
        let settings = TelegramSender {
            bot_token: SecretString::from("1:t".to_string()),
            base_url: server.uri().parse().unwrap(),
        };
        Telegram::new(&settings, reqwest::Client::new())
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            pauses: vec![Duration::from_millis(10); 3],
            jitter: 0.0,
            max_retry_after: Duration::from_secs(1),
        }
    }

    #[tokio::test]
    async fn an_edit_to_the_text_shown_already_is_not_a_failure_and_others_are() {
        let server = MockServer::start().await;
        let refused = |what: &str| {
            ResponseTemplate::new(400).set_body_json(
                json!({"ok": false, "error_code": 400, "description": format!("Bad Request: {what}")}),
            )
        };
        Mock::given(method("POST"))
            .and(path("/bot1:t/editMessageText"))
            .and(body_partial_json(json!({"message_id": 5})))
            .respond_with(refused(
                "message is not modified: specified new message content is the same",
            ))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/bot1:t/editMessageText"))
            .and(body_partial_json(json!({"message_id": 6})))
            .respond_with(refused("message to edit not found"))
            .mount(&server)
            .await;
        let tg = telegram(&server);
        let policy = fast();
        let edit = |m| tg.edit_text(&policy, "9", MessageRef(m), "same", Format::Plain, |_| {});
        assert_eq!(edit(5).await.unwrap(), Edited::Unchanged);
        let gone = edit(6).await.unwrap_err();
        assert!(says(&gone, "message to edit not found"), "{gone}");
        assert_eq!(gone.tries, 1, "a 400 is not tried again");
    }

    #[tokio::test]
    async fn a_quoted_part_replies_to_its_message_and_a_plain_one_does_not() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/bot1:t/sendMessage"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
            .mount(&server)
            .await;
        let tg = telegram(&server);
        let part = Part::Text("hi".into());
        tg.send(&fast(), "-100", &part, Some("501"), |_| {})
            .await
            .unwrap();
        tg.send(&fast(), "-100", &part, None, |_| {}).await.unwrap();
        // Not a Telegram message id: sent without a quote rather than refused.
        tg.send(&fast(), "-100", &part, Some("wamid.1"), |_| {})
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

    #[test]
    fn a_sent_message_id_is_read_from_the_answer_and_kept_as_text() {
        let answer = json!({"ok": true, "result": {"message_id": 77, "chat": {"id": 1}}});
        let id = message_id(&answer).unwrap();
        assert_eq!(id, MessageRef(77));
        assert_eq!(MessageRef::from_stored(&id.to_stored()), Some(id));
        assert_eq!(message_id(&json!({"ok": true})), None);
        assert_eq!(MessageRef::from_stored("wamid.1"), None);
    }
}
