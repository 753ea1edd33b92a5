//! Instagram messaging through the Graph API: `POST {base}/me/messages` with the page
//! access token as the `access_token` parameter; a text, or an image attachment by URL
//! (Instagram has no captions: the text follows as its own message).

use hermes_config::InstagramSender;
use hermes_net::failure::FailureReason;
use secrecy::ExposeSecret;
use serde_json::json;

use super::{Part, meta_errors};
use crate::retry_policy::{RetryPolicy, SendFailure};

/// The longest text of one Instagram message (the Graph API refuses longer).
pub const MAX_CHARS: usize = 1000;

/// Sends to Instagram users.
pub struct Instagram {
    http: reqwest::Client,
    /// The endpoint with the token in its query: never logged (errors drop the URL).
    url: url::Url,
}

impl Instagram {
    pub fn new(settings: &InstagramSender, http: reqwest::Client) -> Self {
        let mut url = settings.base_url.clone();
        url.set_path(&format!("{}/me/messages", url.path().trim_end_matches('/')));
        url.query_pairs_mut()
            .append_pair("access_token", settings.access_token.expose_secret());
        Self { http, url }
    }

    /// Send one part to the user `recipient` (their Instagram-scoped id). Returns the
    /// message's id (`message_id` of the answer).
    pub async fn send(
        &self,
        policy: &RetryPolicy,
        recipient: &str,
        part: &Part,
        on_failure: impl FnMut(FailureReason),
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
            .map_err(meta_errors::reclassify)?;
        Ok(super::answer_id(answer, "/message_id").await)
    }
}
