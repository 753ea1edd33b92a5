//! Slack: a direct message to the app as the Events API posts it (an `event_callback` signed
//! with the app's signing secret, the `v0` scheme of `hermes_channels::slack::verify`), and a
//! fake Web API whose `chat.postMessage` tells the sink.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use hermes_channels::slack::verify;
use hermes_types::model::Platform;
use serde_json::{Value, json};

use super::{Message, Sink};

const SIGNING_SECRET: &str = "bench-slack-signing-secret";
const BOT_TOKEN: &str = "xoxb-bench";

/// Member `n`'s Slack id.
pub fn member(n: i64) -> String {
    format!("UB{n}")
}

/// The direct-message conversation with member `n`.
fn conversation(n: i64) -> String {
    format!("DB{n}")
}

/// The member of a conversation the fleet posted to.
fn member_of(channel: &str) -> Option<i64> {
    super::member_after("DB", channel)
}

async fn post_message<S: Sink>(
    State(sink): State<Arc<S>>,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let channel = body["channel"].as_str().unwrap_or_default();
    if let Some(n) = member_of(channel) {
        sink.sent(
            super::chat(Platform::Slack, n),
            body["text"].as_str().unwrap_or_default(),
        );
    }
    axum::Json(json!({"ok": true, "channel": channel, "ts": "1700000000.000100"}))
}

/// Serve the fake Web API; its base URL (`SLACK_API_BASE_URL`).
pub async fn serve<S: Sink>(sink: Arc<S>) -> anyhow::Result<String> {
    let route = ("/api/chat.postMessage".to_string(), post(post_message::<S>));
    Ok(format!(
        "{}/api",
        super::fake::serve(vec![route], sink).await?
    ))
}

/// The fleet's Slack settings, its Web API at `api`.
pub fn env(api: &str) -> Vec<(&'static str, String)> {
    vec![
        ("SLACK_SIGNING_SECRET", SIGNING_SECRET.to_string()),
        ("SLACK_BOT_TOKEN", BOT_TOKEN.to_string()),
        ("SLACK_API_BASE_URL", api.to_string()),
    ]
}

/// `m` as Slack posts it to `post`, signed now (a retry is signed again, as Slack does, and
/// keeps its `event_id`).
pub fn webhook(post: reqwest::RequestBuilder, m: Message<'_>) -> reqwest::RequestBuilder {
    let now = chrono::Utc::now().timestamp();
    let ts = format!("{}.{:06}", 1_700_000_000 + m.i / 1_000_000, m.i % 1_000_000);
    let body = json!({
        "token": "bench", "team_id": "TBENCH", "api_app_id": "ABENCH",
        "type": "event_callback", "event_id": format!("EvB{}", m.i), "event_time": now,
        "event": {
            "type": "message", "channel_type": "im", "channel": conversation(m.n),
            "user": member(m.n), "text": m.text, "ts": ts, "event_ts": ts
        }
    })
    .to_string();
    let stamp = now.to_string();
    let signature = verify::sign(SIGNING_SECRET.as_bytes(), &stamp, body.as_bytes());
    post.header("content-type", "application/json")
        .header("x-slack-request-timestamp", stamp)
        .header("x-slack-signature", signature)
        .body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_names_its_member() {
        assert_eq!(member_of(&conversation(900_001)), Some(900_001));
        assert_eq!(member_of("C123"), None);
        assert_eq!(member_of("DBx"), None);
    }
}
