//! The Telegram kind of `hermes bench fleet`: a webhook update from one of the linked users
//! (with credits, seeded like the fault harness's), answered when the fleet's `sendMessage`
//! carrying its token reaches a fake Bot API on loopback. The request's latency runs from its
//! scheduled instant to that send, so it covers the whole path: ingest, router, model,
//! delivery and the channel call; the ledger ([`Chats`]) tells answers, failures and doubles.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

use super::ledger::Chats;
use super::load::Ending;

/// The webhook secret and bot token of the fleet under test.
pub const SECRET: &str = "bench-fleet-webhook-secret-0123";
pub const TOKEN: &str = "515151:bench-fleet-bot-token";
/// Linked users the updates come from, round robin: enough that no chat's own pace (about
/// one message a second, as Telegram allows) is what the bench measures.
pub const USERS: usize = 500;

async fn send_message(
    State(channel): State<Arc<Chats>>,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let chat = body["chat_id"]
        .as_i64()
        .or_else(|| body["chat_id"].as_str().and_then(|c| c.parse().ok()))
        .unwrap_or_default();
    channel.sent(chat, body["text"].as_str().unwrap_or_default());
    axum::Json(json!({"ok": true, "result": {"message_id": 1}}))
}

/// Serve the fake Bot API; returns its base URL.
pub async fn serve(channel: Arc<Chats>) -> anyhow::Result<String> {
    crate::faults::load::serve_bot_api(TOKEN, post(send_message), channel).await
}

/// The Telegram sender (and private chat) of the `i`th update; the users seeded for the run.
pub fn sender(i: usize) -> i64 {
    crate::faults::load::sender(i, USERS)
}

/// Send one update carrying `token` and wait for its answer. The caller bounds the wait.
pub async fn one(client: &reqwest::Client, base: &str, chats: &Chats, token: &str) -> Ending {
    let i = chats.next();
    let from = sender(i);
    let rx = chats.expect(token, from);
    let update = json!({
        "update_id": 10_000_000 + i,
        "message": {
            "message_id": 10_000_000 + i,
            "from": {"id": from, "is_bot": false, "first_name": "Bench"},
            "chat": {"id": from, "type": "private"},
            "date": chrono::Utc::now().timestamp(),
            "text": token
        }
    });
    let resp = client
        .post(format!("{base}/webhooks/telegram"))
        .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
        .json(&update)
        .send()
        .await;
    chats.ended(token, resp, rx).await
}
