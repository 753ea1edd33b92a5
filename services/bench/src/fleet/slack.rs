//! The Slack kind of `hermes bench fleet`: a direct message to the app, sent as Slack's Events
//! API sends it (an `event_callback` signed with the app's signing secret, the `v0` scheme of
//! `hermes_channels::slack::verify`), from one of the seeded users' linked Slack members, and
//! answered when the fleet's `chat.postMessage` carrying its token reaches a fake Web API on
//! loopback. The latency covers the whole path, the Slack parser, mrkdwn and sender included;
//! the ledger ([`Chats`]) is the Telegram kind's.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use hermes_channels::slack::verify;
use serde_json::{Value, json};

use super::ledger::{Chats, serve_fake};
use super::load::Ending;

/// The signing secret and bot token of the fleet under test.
pub const SIGNING_SECRET: &str = "bench-fleet-slack-signing-secret";
pub const BOT_TOKEN: &str = "xoxb-bench-fleet";
/// Where Slack's chats sit in the ledger, apart from Telegram's.
const CHATS_FROM: i64 = 10_000_000;

/// The direct-message conversation with member `n`.
fn conversation(n: i64) -> String {
    format!("DB{n}")
}

/// The ledger's chat of a conversation id the fleet posted to.
fn chat_of(channel: &str) -> Option<i64> {
    channel
        .strip_prefix("DB")?
        .parse::<i64>()
        .ok()
        .map(|n| CHATS_FROM + n)
}

async fn post_message(
    State(chats): State<Arc<Chats>>,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let channel = body["channel"].as_str().unwrap_or_default();
    if let Some(chat) = chat_of(channel) {
        chats.sent(chat, body["text"].as_str().unwrap_or_default());
    }
    axum::Json(json!({"ok": true, "channel": channel, "ts": "1700000000.000100"}))
}

/// Serve the fake Web API; returns its base URL (`SLACK_API_BASE_URL`).
pub async fn serve(chats: Arc<Chats>) -> anyhow::Result<String> {
    let base = serve_fake("/api/chat.postMessage", post(post_message), chats).await?;
    Ok(format!("{base}/api"))
}

/// Send one direct message carrying `token` and wait for its answer. The caller bounds the
/// wait.
pub async fn one(client: &reqwest::Client, base: &str, chats: &Chats, token: &str) -> Ending {
    let i = chats.next();
    let n = super::telegram::sender(i);
    let rx = chats.expect(token, CHATS_FROM + n);
    let now = chrono::Utc::now().timestamp();
    let ts = format!("{now}.{:06}", i % 1_000_000);
    let body = json!({
        "token": "bench", "team_id": "TBENCH", "api_app_id": "ABENCH",
        "type": "event_callback", "event_id": format!("EvB{i}"), "event_time": now,
        "event": {
            "type": "message", "channel_type": "im", "channel": conversation(n),
            "user": crate::faults::load::slack_member(&n.to_string()), "text": token, "ts": ts, "event_ts": ts
        }
    })
    .to_string();
    let stamp = now.to_string();
    let resp = client
        .post(format!("{base}/webhooks/slack"))
        .header("content-type", "application/json")
        .header("x-slack-request-timestamp", &stamp)
        .header(
            "x-slack-signature",
            verify::sign(SIGNING_SECRET.as_bytes(), &stamp, body.as_bytes()),
        )
        .body(body)
        .send()
        .await;
    chats.ended(token, resp, rx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_maps_to_a_chat_of_its_own_range() {
        assert_eq!(chat_of(&conversation(900_001)), Some(10_900_001));
        assert_eq!(chat_of("C123"), None);
        assert_eq!(chat_of("DBx"), None);
    }
}
