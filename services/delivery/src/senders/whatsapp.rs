//! WhatsApp, through 360dialog (`POST {base}/messages`, `D360-API-KEY` header) or Meta's
//! Cloud API (`POST {base}/{phone number id}/messages`, Bearer token), as configured. Both
//! take the same Cloud API message body: `text`, `image` by link with a caption, or an
//! approved `template` (sent outside the 24-hour window, docs/channels.md).

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
        let auth = match settings {
            WhatsappSender::Dialog360 { api_key, .. } => Auth::D360(api_key.clone()),
            WhatsappSender::Cloud { access_token, .. } => Auth::Bearer(access_token.clone()),
        };
        Self {
            http,
            url: settings.messages_url(),
            auth,
        }
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
        self.post(policy, &body, on_failure).await
    }

    /// Send the approved template `t` to the user `to` (outside the 24-hour window).
    pub async fn send_template(
        &self,
        policy: &RetryPolicy,
        to: &str,
        t: &TemplateMessage,
        on_failure: impl FnMut(FailureReason),
    ) -> Result<Option<String>, SendFailure> {
        let body = json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "template",
            "template": t.body(),
        });
        self.post(policy, &body, on_failure).await
    }

    /// POST one message body with in-call retries; Meta's coded refusals reclassified.
    /// Returns the message's wamid (`messages[0].id` of the answer), which its statuses name.
    async fn post(
        &self,
        policy: &RetryPolicy,
        body: &serde_json::Value,
        on_failure: impl FnMut(FailureReason),
    ) -> Result<Option<String>, SendFailure> {
        let answer = policy
            .send(
                || {
                    let req = self.http.post(&self.url).json(body);
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

/// An approved template with its body parameters filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateMessage {
    /// The template's name at Meta.
    pub name: String,
    /// Its language code.
    pub language: String,
    /// The body's parameters in order, as text.
    pub parameters: Vec<String>,
}

impl TemplateMessage {
    /// The `template` object of a message: name, language and the body's text parameters
    /// (no components when it has none).
    pub fn body(&self) -> serde_json::Value {
        let mut t = json!({
            "name": self.name,
            "language": {"code": self.language},
        });
        if !self.parameters.is_empty() {
            let params: Vec<_> = self
                .parameters
                .iter()
                .map(|p| json!({"type": "text", "text": p}))
                .collect();
            t["components"] = json!([{"type": "body", "parameters": params}]);
        }
        t
    }
}
