//! WhatsApp, through 360dialog (`POST {base}/messages`, `D360-API-KEY` header) or Meta's
//! Cloud API (`POST {base}/{phone number id}/messages`, Bearer token), as configured. Both
//! take the same Cloud API message body: `text`, or `image` by link with a caption.

use hermes_config::WhatsappSender;
use hermes_net::failure::FailureReason;
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use super::{Part, meta_errors};
use crate::retry_policy::{RetryPolicy, SendFailure};

/// The longest text body of one WhatsApp message.
pub const MAX_CHARS: usize = 4096;
/// The longest caption of a WhatsApp image.
pub const MAX_CAPTION: usize = 1024;

enum Auth {
    D360(SecretString),
    Bearer(SecretString),
}

/// Sends to WhatsApp users.
pub struct Whatsapp {
    http: reqwest::Client,
    url: String,
    auth: Auth,
}

impl Whatsapp {
    pub fn new(settings: &WhatsappSender, http: reqwest::Client) -> Self {
        let (url, auth) = match settings {
            WhatsappSender::Dialog360 { api_key, base_url } => (
                format!("{}/messages", base_url.as_str().trim_end_matches('/')),
                Auth::D360(api_key.clone()),
            ),
            WhatsappSender::Cloud {
                access_token,
                phone_number_id,
                base_url,
            } => (
                format!(
                    "{}/{phone_number_id}/messages",
                    base_url.as_str().trim_end_matches('/')
                ),
                Auth::Bearer(access_token.clone()),
            ),
        };
        Self { http, url, auth }
    }

    /// Send one part to the user `to` (their WhatsApp id, the inbound chat id). Returns the
    /// message's wamid (`messages[0].id` of the answer), which its statuses name.
    pub async fn send(
        &self,
        policy: &RetryPolicy,
        to: &str,
        part: &Part,
        on_failure: impl FnMut(FailureReason),
    ) -> Result<Option<String>, SendFailure> {
        let mut body = json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
        });
        match part {
            Part::Text(text) => {
                body["type"] = json!("text");
                body["text"] = json!({ "body": text, "preview_url": false });
            }
            Part::Image { url, caption } => {
                body["type"] = json!("image");
                body["image"] = json!({ "link": url });
                if let Some(c) = caption {
                    body["image"]["caption"] = json!(c);
                }
            }
        }
        let answer = policy
            .send(
                || {
                    let req = self.http.post(&self.url).json(&body);
                    match &self.auth {
                        Auth::D360(key) => req.header("D360-API-KEY", key.expose_secret()),
                        Auth::Bearer(token) => req.bearer_auth(token.expose_secret()),
                    }
                },
                on_failure,
            )
            .await
            .map_err(meta_errors::reclassify)?;
        Ok(super::answer_id(answer, "/messages/0/id").await)
    }
}
