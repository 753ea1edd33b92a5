//! Telegram: an update as the Bot API posts it (with the webhook's secret token), and a fake
//! Bot API whose `sendMessage` tells the sink. The chat is the member's number itself.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use serde_json::{Value, json};

use super::{Message, Sink};

/// The webhook secret and bot token of the fleet under test.
pub const SECRET: &str = "bench-webhook-secret-0123";
const TOKEN: &str = "515151:bench-bot-token";

async fn send_message<S: Sink>(
    State(sink): State<Arc<S>>,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let chat = body["chat_id"]
        .as_i64()
        .or_else(|| body["chat_id"].as_str().and_then(|c| c.parse().ok()))
        .unwrap_or_default();
    sink.sent(chat, body["text"].as_str().unwrap_or_default());
    axum::Json(json!({"ok": true, "result": {"message_id": 1}}))
}

/// Serve the fake Bot API; its base URL (`TELEGRAM_API_BASE_URL`).
pub async fn serve<S: Sink>(sink: Arc<S>) -> anyhow::Result<String> {
    let route = (format!("/bot{TOKEN}/sendMessage"), post(send_message::<S>));
    super::fake::serve(vec![route], sink).await
}

/// The fleet's Telegram settings, its Bot API at `api`.
pub fn env(api: &str) -> Vec<(&'static str, String)> {
    vec![
        ("TELEGRAM_WEBHOOK_SECRET", SECRET.to_string()),
        ("TELEGRAM_BOT_TOKEN", TOKEN.to_string()),
        ("TELEGRAM_API_BASE_URL", api.to_string()),
    ]
}

/// The update of the `i`th message, from `from` in its private chat, saying `text`.
pub fn update(i: usize, from: i64, text: &str) -> Value {
    json!({
        "update_id": 1_000_000 + i,
        "message": {
            "message_id": 1_000_000 + i,
            "from": {"id": from, "is_bot": false, "first_name": "Bench"},
            "chat": {"id": from, "type": "private"},
            "date": chrono::Utc::now().timestamp(),
            "text": text
        }
    })
}

/// `m` as Telegram posts it to `post`.
pub fn webhook(post: reqwest::RequestBuilder, m: Message<'_>) -> reqwest::RequestBuilder {
    post.header("x-telegram-bot-api-secret-token", SECRET)
        .json(&update(m.i, m.n, m.text))
}
