//! Instagram messaging through the Graph API: `POST {base}/me/messages` with the page
//! access token as the `access_token` parameter.

use hermes_shared::config::InstagramSender;
use hermes_shared::failure::FailureReason;
use secrecy::ExposeSecret;
use serde_json::json;

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

    /// Send one text part to the user `recipient` (their Instagram-scoped id).
    pub async fn send(
        &self,
        policy: &RetryPolicy,
        recipient: &str,
        text: &str,
        on_failure: impl FnMut(FailureReason),
    ) -> Result<(), SendFailure> {
        let body = json!({ "recipient": { "id": recipient }, "message": { "text": text } });
        policy
            .send(|| self.http.post(self.url.clone()).json(&body), on_failure)
            .await
            .map(drop)
    }
}
