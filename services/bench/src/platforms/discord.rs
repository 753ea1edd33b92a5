//! Discord: a slash command (`/ask`) as Discord posts an interaction (signed with Ed25519 over
//! the timestamp and body, `hermes_channels::discord::verify::sign`), and a fake of Discord's
//! API whose edit of the deferred response, on the interaction's token, tells the sink. The
//! interaction token names the member, so the fake knows whose answer it is.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::routing::patch;
use hermes_channels::discord::verify;
use hermes_types::model::Platform;
use serde_json::{Value, json};

use super::{Message, Sink};

/// The seed of the application's signing key, whose public half is `DISCORD_PUBLIC_KEY`.
const SEED: [u8; 32] = [0xb3; 32];
const APPLICATION: &str = "1300000000000000001";

/// Member `n`'s Discord id (a snowflake).
pub fn member(n: i64) -> String {
    (1_600_000_000_000_000_000i64 + n).to_string()
}

/// The interaction token of the `i`th message, from member `n`.
fn token_of(n: i64, i: usize) -> String {
    format!("bench{n}x{i}")
}

/// The member an interaction token was given for.
fn member_of(token: &str) -> Option<i64> {
    token.strip_prefix("bench")?.split_once('x')?.0.parse().ok()
}

async fn edit_original<S: Sink>(
    State(sink): State<Arc<S>>,
    Path((_application, token)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    if let Some(n) = member_of(&token) {
        let text = body["content"].as_str().unwrap_or_default();
        sink.sent(super::chat(Platform::Discord, n), text);
    }
    axum::Json(json!({"id": "1300000000000000100"}))
}

/// Serve the fake API; its base URL (`DISCORD_API_URL`).
pub async fn serve<S: Sink>(sink: Arc<S>) -> anyhow::Result<String> {
    let path = "/api/v10/webhooks/{application}/{token}/messages/@original".to_string();
    let base = super::fake::serve(vec![(path, patch(edit_original::<S>))], sink).await?;
    Ok(format!("{base}/api/v10"))
}

/// The fleet's Discord settings, its API at `api`.
pub fn env(api: &str) -> Vec<(&'static str, String)> {
    let key = verify::sign(&SEED, "0", b"").map_or_else(String::new, |(key, _)| key);
    vec![
        ("DISCORD_PUBLIC_KEY", key),
        ("DISCORD_API_URL", api.to_string()),
    ]
}

/// `m` as Discord posts it to `post`, signed now.
pub fn webhook(post: reqwest::RequestBuilder, m: Message<'_>) -> reqwest::RequestBuilder {
    let body = json!({
        "id": (1_400_000_000_000_000_000u64 + m.i as u64).to_string(),
        "application_id": APPLICATION, "type": 2, "token": token_of(m.n, m.i), "version": 1,
        "channel_id": (1_500_000_000_000_000_000i64 + m.n).to_string(),
        "user": {"id": member(m.n)},
        "data": {"name": "ask", "options": [{"name": "question", "type": 3, "value": m.text}]},
    })
    .to_string();
    let stamp = chrono::Utc::now().timestamp().to_string();
    let signature = verify::sign(&SEED, &stamp, body.as_bytes()).map_or_else(String::new, |s| s.1);
    post.header("content-type", "application/json")
        .header(verify::TIMESTAMP, stamp)
        .header(verify::SIGNATURE, signature)
        .body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interaction_token_names_its_member() {
        assert_eq!(member_of(&token_of(900_001, 7)), Some(900_001));
        assert_eq!(member_of("other"), None);
        assert_eq!(env("x")[0].1.len(), 64);
    }
}
