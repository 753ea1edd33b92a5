//! Slack's sends: `chat.postMessage` (<https://api.slack.com/methods/chat.postMessage>) with
//! the bot token as a Bearer header, in the conversation and thread the run's chat id names
//! ([`super::chat`]). A text goes as `text`, the model's Markdown rewritten as Slack's
//! `mrkdwn` ([`super::mrkdwn`]); an image as an
//! image block with its caption in a section before it. Texts over 4,000 characters are
//! split beforehand ([`super::LIMITS`]). Slack answers most refusals with 200 and
//! `ok: false` ([`super::errors`]).

use hermes_config::SlackSender;
use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::chat::{SlackChat, Ts};
use super::errors;
use super::mrkdwn::from_markdown;
use crate::{Limits, Outbound, Part, RetryPolicy, SendFailure};

/// Sends to Slack conversations.
pub struct Slack {
    http: reqwest::Client,
    token: SecretString,
    post_message: String,
    pub(super) update: String,
}

impl Slack {
    /// The sender of the bot `settings` names, on the stage's client `http`.
    pub fn new(settings: &SlackSender, http: reqwest::Client) -> Self {
        let base = settings.base_url.as_str().trim_end_matches('/');
        Self {
            http,
            token: settings.bot_token.clone(),
            post_message: format!("{base}/chat.postMessage"),
            update: format!("{base}/chat.update"),
        }
    }

    /// POST `body` to the Web API method at `url`; Slack's answer when it says `ok`.
    pub(super) async fn call(
        &self,
        policy: &RetryPolicy,
        url: &str,
        body: &Value,
        mut on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Value, SendFailure> {
        let token = self.token.expose_secret();
        let answer = policy
            .send(
                || self.http.post(url).bearer_auth(token).json(body),
                &mut on_failure,
            )
            .await?;
        // A 2xx whose body is not JSON says nothing of `ok`: read as a refusal.
        errors::check(answer.json().await.unwrap_or(Value::Null), on_failure)
    }

    /// Post `text` (at most [`super::LIMITS`]`.max_chars`) in `chat`; the message's `ts`.
    pub async fn post_text(
        &self,
        policy: &RetryPolicy,
        chat: &SlackChat,
        text: &str,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Ts, SendFailure> {
        let mut body = json!({ "channel": chat.channel, "text": from_markdown(text) });
        in_thread(&mut body, chat);
        let answer = self
            .call(policy, &self.post_message, &body, on_failure)
            .await?;
        message_ts(&answer).ok_or_else(|| SendFailure {
            reason: FailureReason::InvalidRecipient,
            status: None,
            body: None,
            detail: "Slack accepted the message but named no ts".into(),
            tries: 1,
        })
    }
}

/// The conversation and thread of a run's chat id, or the failure of one that is not
/// Slack's (parked: it cannot become sendable).
pub(super) fn chat_of(chat_id: &str) -> Result<SlackChat, SendFailure> {
    SlackChat::parse(chat_id).ok_or_else(|| SendFailure {
        reason: FailureReason::InvalidRecipient,
        status: None,
        body: None,
        detail: "the chat id is not a Slack conversation".into(),
        tries: 0,
    })
}

/// Put the post in `chat`'s thread, when it has one.
fn in_thread(body: &mut Value, chat: &SlackChat) {
    if let Some(ts) = chat.thread {
        body["thread_ts"] = json!(ts.to_string());
    }
}

/// The `ts` of Slack's answer to a post.
pub(super) fn message_ts(answer: &Value) -> Option<Ts> {
    answer.get("ts")?.as_str()?.parse().ok()
}

impl Outbound for Slack {
    fn platform(&self) -> Platform {
        Platform::Slack
    }

    fn limits(&self) -> Limits {
        super::LIMITS
    }

    /// Send one part to the conversation (and thread) of `chat_id`: a text, or an image
    /// block with its caption. Slack threads rather than quotes, so `quote` is not used.
    /// Returns the message's `ts`.
    async fn send(
        &self,
        policy: &RetryPolicy,
        chat_id: &str,
        part: &Part,
        _quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let chat = chat_of(chat_id)?;
        let mut body = match part {
            Part::Text(text) => json!({ "channel": chat.channel, "text": from_markdown(text) }),
            Part::Image { url, caption } => {
                let image = json!({ "type": "image", "image_url": url,
                    "alt_text": caption.as_deref().unwrap_or("image") });
                let caption = caption.as_deref().map(from_markdown);
                let blocks = match &caption {
                    Some(c) => vec![
                        json!({ "type": "section", "text": { "type": "mrkdwn", "text": c } }),
                        image,
                    ],
                    None => vec![image],
                };
                // The text is what notifications and screen readers show.
                let fallback = caption.as_deref().unwrap_or(url);
                json!({ "channel": chat.channel, "text": fallback, "blocks": blocks })
            }
        };
        in_thread(&mut body, &chat);
        let answer = self
            .call(policy, &self.post_message, &body, on_failure)
            .await?;
        Ok(message_ts(&answer).map(|ts| ts.to_string()))
    }
}

/// A sender of the bot `xoxb-test` at `server`, for the tests of this folder.
#[cfg(test)]
pub(super) fn for_tests(server: &wiremock::MockServer) -> Slack {
    hermes_net::install_crypto_provider();
    let settings = SlackSender {
        bot_token: SecretString::from("xoxb-test".to_string()),
        base_url: server.uri().parse().unwrap(),
        files_base_url: server.uri().parse().unwrap(),
    };
    Slack::new(&settings, reqwest::Client::new())
}

#[cfg(test)]
mod tests {
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    async fn bodies(server: &MockServer) -> Vec<Value> {
        server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_part_goes_to_its_conversation_and_thread_with_the_bot_token() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/chat.postMessage"))
            .and(header("authorization", "Bearer xoxb-test"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"ok": true, "channel": "C1", "ts": "1503435956.000247"})),
            )
            .mount(&server)
            .await;
        let slack = for_tests(&server);
        let p = RetryPolicy::fast();
        let id = slack
            .send(
                &p,
                "C1:1503435900.000100",
                &Part::Text("hi".into()),
                Some("x"),
                |_| {},
            )
            .await
            .unwrap();
        assert_eq!(id.as_deref(), Some("1503435956.000247"));
        slack
            .send(&p, "D1", &Part::Text("dm".into()), None, |_| {})
            .await
            .unwrap();
        let image = Part::Image {
            url: "https://example.com/a.png".into(),
            caption: Some("a **sunset** & sea".into()),
        };
        slack.send(&p, "C1", &image, None, |_| {}).await.unwrap();
        let sent = bodies(&server).await;
        assert_eq!(
            sent[0],
            json!({"channel": "C1", "text": "hi", "thread_ts": "1503435900.000100"})
        );
        assert_eq!(sent[1], json!({"channel": "D1", "text": "dm"}));
        assert_eq!(sent[2]["blocks"][0]["text"]["text"], "a *sunset* &amp; sea");
        assert_eq!(
            sent[2]["blocks"][1]["image_url"],
            "https://example.com/a.png"
        );
        assert_eq!(sent[2]["text"], "a *sunset* &amp; sea");
    }

    #[tokio::test]
    async fn ok_false_is_a_failure_with_slacks_code_and_a_bad_chat_id_sends_nothing() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(json!({"ok": false, "error": "channel_not_found"})),
            )
            .mount(&server)
            .await;
        let slack = for_tests(&server);
        let part = Part::Text("hi".into());
        let f = slack
            .send(&RetryPolicy::fast(), "C404", &part, None, |_| {})
            .await
            .unwrap_err();
        assert_eq!(f.reason, FailureReason::InvalidRecipient);
        assert!(f.detail.contains("channel_not_found"), "{}", f.detail);
        let f = slack
            .send(&RetryPolicy::fast(), "not a channel", &part, None, |_| {})
            .await
            .unwrap_err();
        assert_eq!((f.reason, f.tries), (FailureReason::InvalidRecipient, 0));
        assert_eq!(server.received_requests().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn ratelimited_waits_its_retry_after_and_sends() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(429)
                    .insert_header("retry-after", "1")
                    .set_body_json(json!({"ok": false, "error": "ratelimited"})),
            )
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"ok": true, "ts": "1.000001"})),
            )
            .mount(&server)
            .await;
        let started = std::time::Instant::now();
        let mut seen = Vec::new();
        let slack = for_tests(&server);
        slack
            .send(
                &RetryPolicy::fast(),
                "C1",
                &Part::Text("hi".into()),
                None,
                |r| seen.push(r),
            )
            .await
            .unwrap();
        assert!(started.elapsed() >= std::time::Duration::from_secs(1));
        assert_eq!(seen, [FailureReason::RateLimited]);
    }
}
