//! The Messenger Platform's Send API, the same for Instagram and Facebook Messenger
//! (<https://developers.facebook.com/docs/messenger-platform/reference/send-api/>):
//! `POST {base}/me/messages` with the Page's (or account's) token as the `access_token`
//! parameter and `{"recipient":{"id"},"message":…}`; a text, or an image attachment by URL
//! (no captions: the text follows as its own message); sender actions (`typing_on`,
//! `mark_seen`) on the same endpoint. Its refusals are read with Meta's one table
//! ([`super::errors`]).

use hermes_net::failure::FailureReason;
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};

use super::{answer_id, errors};
use crate::{Part, RetryPolicy, SendFailure};

/// The Send API's endpoint of one Page or account, the token in its query: never logged
/// (errors drop the URL).
#[derive(Clone)]
pub struct MessagesUrl(url::Url);

impl MessagesUrl {
    /// `{base_url}/me/messages?access_token={token}`.
    pub fn new(base_url: &url::Url, token: &SecretString) -> Self {
        let mut url = base_url.clone();
        url.set_path(&format!("{}/me/messages", url.path().trim_end_matches('/')));
        url.query_pairs_mut()
            .append_pair("access_token", token.expose_secret());
        Self(url)
    }

    /// The request of a sender action (`typing_on`, `mark_seen`) to `recipient`, on `http`.
    pub fn sender_action(
        &self,
        http: &reqwest::Client,
        recipient: &str,
        action: &str,
    ) -> reqwest::RequestBuilder {
        http.post(self.0.clone())
            .json(&json!({ "recipient": { "id": recipient }, "sender_action": action }))
    }
}

/// The Send API of one Page or account, on the delivery stage's client.
pub struct SendApi {
    http: reqwest::Client,
    url: MessagesUrl,
}

impl SendApi {
    /// The Send API at `base_url` with `token`, on `http`.
    pub fn new(base_url: &url::Url, token: &SecretString, http: reqwest::Client) -> Self {
        Self {
            http,
            url: MessagesUrl::new(base_url, token),
        }
    }

    /// The `message` object of one part.
    pub fn message(part: &Part) -> Value {
        match part {
            Part::Text(text) => json!({ "text": text }),
            Part::Image { url, .. } => {
                json!({ "attachment": { "type": "image", "payload": { "url": url } } })
            }
        }
    }

    /// POST `body` with in-call retries; the message's id (`message_id` of the answer).
    pub async fn send(
        &self,
        policy: &RetryPolicy,
        body: &Value,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let answer = policy
            .send(|| self.http.post(self.url.0.clone()).json(body), on_failure)
            .await
            .map_err(errors::reclassify)?;
        Ok(answer_id(answer, "/message_id").await)
    }
}
