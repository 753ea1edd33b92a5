//! What Messenger and Instagram share, as Meta's Messenger Platform does: a webhook of
//! `messaging` events signed into `X-Hub-Signature-256` by `hermes_channels::meta::verify`,
//! and a Send API (`/me/messages`) whose recipient id is the ledger's chat number itself.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use hermes_channels::meta::verify;
use serde_json::{Value, json};

use super::Sink;

async fn send<S: Sink>(State(sink): State<Arc<S>>, body: axum::body::Bytes) -> axum::Json<Value> {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let recipient = body["recipient"]["id"].as_str().unwrap_or_default();
    // Sender actions (`typing_on`, `mark_seen`) carry no message.
    if let (Ok(chat), Some(text)) = (recipient.parse::<i64>(), body["message"]["text"].as_str()) {
        sink.sent(chat, text);
    }
    axum::Json(json!({"recipient_id": recipient, "message_id": "m_bench"}))
}

/// Serve a fake Graph API's Send API; its base URL (`…_API_BASE_URL`).
pub async fn serve<S: Sink>(sink: Arc<S>) -> anyhow::Result<String> {
    let route = ("/v21.0/me/messages".to_string(), post(send::<S>));
    Ok(format!(
        "{}/v21.0",
        super::fake::serve(vec![route], sink).await?
    ))
}

/// One text message from `sender` to `account`, as Meta posts a webhook of `object`
/// (`page`, `instagram`) signed with `secret` to `post`.
pub fn webhook(
    post: reqwest::RequestBuilder,
    (object, account, secret): (&str, &str, &str),
    sender: &str,
    mid: &str,
    text: &str,
) -> reqwest::RequestBuilder {
    let now = chrono::Utc::now().timestamp_millis();
    let body = json!({
        "object": object,
        "entry": [{"id": account, "time": now, "messaging": [{
            "sender": {"id": sender}, "recipient": {"id": account}, "timestamp": now,
            "message": {"mid": mid, "text": text}
        }]}]
    })
    .to_string();
    let signature = verify::sign_hub(secret.as_bytes(), body.as_bytes());
    post.header("content-type", "application/json")
        .header("x-hub-signature-256", signature)
        .body(body)
}
