//! WhatsApp sends, through 360dialog (`POST {base}/messages`, `D360-API-KEY` header) or
//! Meta's Cloud API (`POST {base}/{phone number id}/messages`, Bearer token), as configured
//! ([`super::auth`]). Both take the same Cloud API message body
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages>): `text`,
//! `image` by link with a caption, or an approved `template` (sent outside the 24-hour
//! window, docs/channels.md, "WhatsApp's window and templates").

use hermes_config::WhatsappSender;
use hermes_net::failure::FailureReason;
use hermes_types::model::Platform;
use serde_json::json;

use super::TemplateMessage;
use super::auth::Messages;
use crate::meta::{answer_id, errors};
use crate::{Limits, Outbound, Part, RetryPolicy, SendFailure};

/// Sends to WhatsApp users.
pub struct Whatsapp {
    http: reqwest::Client,
    messages: Messages,
}

impl Whatsapp {
    /// The sender of the number `settings` names, on the stage's client `http`.
    pub fn new(settings: &WhatsappSender, http: reqwest::Client) -> Self {
        Self {
            http,
            messages: Messages::new(settings),
        }
    }

    /// Send the approved template `t` to the user `to` (outside the 24-hour window).
    pub async fn send_template(
        &self,
        policy: &RetryPolicy,
        to: &str,
        t: &TemplateMessage,
        on_failure: impl FnMut(FailureReason) + Send,
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
        on_failure: impl FnMut(FailureReason) + Send,
    ) -> Result<Option<String>, SendFailure> {
        let answer = policy
            .send(|| self.messages.post(&self.http, body), on_failure)
            .await
            .map_err(errors::reclassify)?;
        Ok(answer_id(answer, "/messages/0/id").await)
    }
}

impl Outbound for Whatsapp {
    fn platform(&self) -> Platform {
        Platform::Whatsapp
    }

    fn limits(&self) -> Limits {
        super::LIMITS
    }

    /// Send one part to the user `to` (their WhatsApp id, the inbound chat id); WhatsApp
    /// quotes nothing. Returns the message's wamid (`messages[0].id` of the answer), which
    /// its statuses name.
    async fn send(
        &self,
        policy: &RetryPolicy,
        to: &str,
        part: &Part,
        _quote: Option<&str>,
        on_failure: impl FnMut(FailureReason) + Send,
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
}
