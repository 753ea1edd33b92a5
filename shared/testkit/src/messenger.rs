//! Facebook Messenger in tests (docs/channels.md, "Facebook Messenger"): a fake of the Send
//! API answering every message with a new `message_id` and every sender action as Meta does,
//! what it received, and a Page's webhook body as Meta posts it.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use wiremock::{Request, Respond, ResponseTemplate};

/// The Page's access token the fake expects.
pub const MESSENGER_TOKEN: &str = "messenger-page-token";

/// Answers the Send API as Meta does: a new `message_id` for a message, the recipient alone
/// for a sender action.
pub struct MessengerAnswers(AtomicU64);

impl Respond for MessengerAnswers {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let recipient = body["recipient"]["id"].clone();
        if body.get("sender_action").is_some() {
            return ResponseTemplate::new(200).set_body_json(json!({ "recipient_id": recipient }));
        }
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        ResponseTemplate::new(200)
            .set_body_json(json!({ "recipient_id": recipient, "message_id": format!("m_{n}") }))
    }
}

/// The Send API of the fake Page, before its answer: add matchers, then `respond_with`
/// ([`messenger_answers`] or a failure) and mount.
pub fn messenger_send() -> wiremock::MockBuilder {
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path("/me/messages"))
        .and(wiremock::matchers::query_param(
            "access_token",
            MESSENGER_TOKEN,
        ))
}

/// A new [`MessengerAnswers`].
pub fn messenger_answers() -> MessengerAnswers {
    MessengerAnswers(AtomicU64::new(1))
}

/// A fake Send API accepting everything; pass its `uri()` as `MESSENGER_API_BASE_URL`.
pub async fn messenger_fake() -> wiremock::MockServer {
    let server = wiremock::MockServer::start().await;
    messenger_send()
        .respond_with(messenger_answers())
        .mount(&server)
        .await;
    server
}

/// Every body the fake received (messages and sender actions), in order.
pub async fn messenger_sent(api: &wiremock::MockServer) -> Vec<Value> {
    api.received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path() == "/me/messages")
        .filter_map(|r| serde_json::from_slice(&r.body).ok())
        .collect()
}

/// A Page's webhook body with one text `text` from `psid` (message `mid`), sent now.
pub fn messenger_text(psid: &str, mid: &str, text: &str) -> Value {
    let now = chrono::Utc::now().timestamp_millis();
    json!({
        "object": "page",
        "entry": [{
            "id": "682498302938465",
            "time": now,
            "messaging": [{
                "sender": { "id": psid },
                "recipient": { "id": "682498302938465" },
                "timestamp": now,
                "message": { "mid": mid, "text": text }
            }]
        }]
    })
}
