//! The Messenger kind of `hermes bench fleet`: a message to the Page from one of the seeded
//! users' linked page-scoped ids, posted as Meta posts it (`object: page`, signed into
//! `X-Hub-Signature-256` by `hermes_channels::meta::verify`), answered when the fleet's Send
//! API call carrying its token reaches a fake Graph API on loopback. It adds Meta's signature
//! check, the Messenger parser, its 24-hour window and the Send API to the path; the ledger
//! ([`Chats`]) is shared with the other chat kinds.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use hermes_channels::meta::verify;
use serde_json::{Value, json};

use super::ledger::{Chats, serve_fake};
use super::load::Ending;

/// The app secret and Page token of the fleet under test, and the Page's id.
pub const APP_SECRET: &str = "bench-fleet-messenger-app-secret";
pub const PAGE_TOKEN: &str = "bench-fleet-page-token";
const PAGE_ID: &str = "700000000000001";

/// The ledger's chat of a page-scoped id the fleet sent to (the PSID is the chat's number).
fn chat_of(psid: &str) -> Option<i64> {
    let psid: i64 = psid.parse().ok()?;
    (psid >= crate::faults::load::MESSENGER_FROM).then_some(psid)
}

async fn send(State(chats): State<Arc<Chats>>, body: axum::body::Bytes) -> axum::Json<Value> {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let psid = body["recipient"]["id"].as_str().unwrap_or_default();
    // Sender actions (`mark_seen`, `typing_on`) carry no message.
    if let (Some(chat), Some(text)) = (chat_of(psid), body["message"]["text"].as_str()) {
        chats.sent(chat, text);
    }
    axum::Json(json!({"recipient_id": psid, "message_id": "m_bench"}))
}

/// Serve the fake Graph API; returns its base URL (`MESSENGER_API_BASE_URL`).
pub async fn serve(chats: Arc<Chats>) -> anyhow::Result<String> {
    let base = serve_fake("/v21.0/me/messages", post(send), chats).await?;
    Ok(format!("{base}/v21.0"))
}

/// Send one message carrying `token` and wait for its answer. The caller bounds the wait.
pub async fn one(client: &reqwest::Client, base: &str, chats: &Chats, token: &str) -> Ending {
    let i = chats.next();
    let psid = crate::faults::load::messenger_psid(super::telegram::sender(i));
    let rx = chats.expect(token, psid);
    let now = chrono::Utc::now().timestamp_millis();
    let body = json!({
        "object": "page",
        "entry": [{"id": PAGE_ID, "time": now, "messaging": [{
            "sender": {"id": psid.to_string()}, "recipient": {"id": PAGE_ID}, "timestamp": now,
            "message": {"mid": format!("m_bench_{i}"), "text": token}
        }]}]
    })
    .to_string();
    let resp = client
        .post(format!("{base}/webhooks/messenger"))
        .header("content-type", "application/json")
        .header(
            "x-hub-signature-256",
            verify::sign_hub(APP_SECRET.as_bytes(), body.as_bytes()),
        )
        .body(body)
        .send()
        .await;
    chats.ended(token, resp, rx).await
}
