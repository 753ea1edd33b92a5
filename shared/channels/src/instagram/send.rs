//! Instagram sends through the Graph API
//! (<https://developers.facebook.com/docs/messenger-platform/instagram/features/send-message>):
//! `POST {base}/me/messages` with the page access token as the `access_token` parameter; a
//! text, or an image attachment by URL (Instagram has no captions: the text follows as its
//! own message). Its error codes are Meta's ([`crate::meta::errors`]).

use hermes_config::InstagramSender;
use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;
use secrecy::ExposeSecret;
use serde_json::json;

use crate::meta::{answer_id, errors};
use crate::{Limits, Outbound, Part, RetryPolicy, SendFailure};

/// Sends to Instagram users.
pub struct Instagram {
    http: reqwest::Client,
    /// The endpoint with the token in its query: never logged (errors drop the URL).
    url: url::Url,
}

impl Instagram {
    /// The sender of the account `settings` names, on the stage's client `http`.
    pub fn new(settings: &InstagramSender, http: reqwest::Client) -> Self {
        let mut url = settings.base_url.clone();
        url.set_path(&format!("{}/me/messages", url.path().trim_end_matches('/')));
        url.query_pairs_mut()
            .append_pair("access_token", settings.access_token.expose_secret());
        Self { http, url }
    }
}

impl Outbound for Instagram {
    fn platform(&self) -> Platform {
        Platform::Instagram
    }

    fn limits(&self) -> Limits {
        super::LIMITS
    }

    /// Send one part to the user `recipient` (their Instagram-scoped id); Instagram quotes
    /// nothing. Returns the message's id (`message_id` of the answer).
    async fn send(
        &self,
        policy: &RetryPolicy,
        recipient: &str,
        part: &Part,
        _quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let message = match part {
            Part::Text(text) => json!({ "text": text }),
            Part::Image { url, .. } => {
                json!({ "attachment": { "type": "image", "payload": { "url": url } } })
            }
        };
        let body = json!({ "recipient": { "id": recipient }, "message": message });
        let answer = policy
            .send(|| self.http.post(self.url.clone()).json(&body), on_failure)
            .await
            .map_err(errors::reclassify)?;
        Ok(answer_id(answer, "/message_id").await)
    }
}
