//! WhatsApp's presence: one call marks the person's message read and shows the typing
//! indicator
//! (<https://developers.facebook.com/docs/whatsapp/cloud-api/typing-indicators>), which
//! WhatsApp clears when the reply arrives (or after 25 s).

use hermes_config::WhatsappSender;
use reqwest::RequestBuilder;
use serde_json::json;

use super::auth::Messages;

/// The read receipt with typing indicator of the configured number.
pub struct ReadAndTyping {
    messages: Messages,
}

impl ReadAndTyping {
    /// The call of the number `settings` names.
    pub fn new(settings: &WhatsappSender) -> Self {
        Self {
            messages: Messages::new(settings),
        }
    }

    /// Mark message `wamid` read and show the typing indicator, in one call.
    pub fn request(&self, http: &reqwest::Client, wamid: &str) -> RequestBuilder {
        let body = json!({
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": wamid,
            "typing_indicator": {"type": "text"},
        });
        self.messages.post(http, &body)
    }
}
