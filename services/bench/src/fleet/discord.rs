//! The Discord kind of `hermes bench fleet`: a slash command (`/ask`) from one of the seeded
//! users' linked Discord ids, posted as Discord posts an interaction (signed with Ed25519 over
//! the timestamp and body, `hermes_channels::discord::verify::sign`), answered when the
//! fleet's edit of the deferred response, on the interaction's token, reaches a fake of
//! Discord's API on loopback. The token names the user, so the fake knows whose answer it
//! is. It adds the signature check, the interaction parser and the follow-up sender (with
//! its rate-limit buckets) to the path; the ledger ([`Chats`]) is shared with the other chat
//! kinds.

use axum::extract::{Path, State};
use axum::routing::patch;
use hermes_channels::discord::verify;
use serde_json::{Value, json};
use std::sync::Arc;

use super::ledger::{Chats, serve_fake};
use super::load::Ending;

/// The seed of the application's signing key; [`public_key`] is its `DISCORD_PUBLIC_KEY`.
const SEED: [u8; 32] = [0xb3; 32];
/// The application's id.
const APPLICATION: &str = "1300000000000000001";
/// Where Discord's chats sit in the ledger, apart from the other kinds'.
const CHATS_FROM: i64 = 50_000_000;

/// `DISCORD_PUBLIC_KEY` of the fleet under test.
pub fn public_key() -> String {
    verify::sign(&SEED, "0", b"").map_or_else(String::new, |(key, _)| key)
}

/// The interaction token of message `i` from member `n`.
fn token_of(n: i64, i: usize) -> String {
    format!("bench{n}x{i}")
}

/// The ledger's chat of an interaction token the fleet answered on.
fn chat_of(token: &str) -> Option<i64> {
    let (n, _) = token.strip_prefix("bench")?.split_once('x')?;
    n.parse::<i64>().ok().map(|n| CHATS_FROM + n)
}

async fn edit_original(
    State(chats): State<Arc<Chats>>,
    Path((_application, token)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> axum::Json<Value> {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    if let Some(chat) = chat_of(&token) {
        chats.sent(chat, body["content"].as_str().unwrap_or_default());
    }
    axum::Json(json!({"id": "1300000000000000100"}))
}

/// Serve the fake API; returns its base URL (`DISCORD_API_URL`).
pub async fn serve(chats: Arc<Chats>) -> anyhow::Result<String> {
    let path = "/api/v10/webhooks/{application}/{token}/messages/@original";
    let base = serve_fake(path, patch(edit_original), chats).await?;
    Ok(format!("{base}/api/v10"))
}

/// Send one slash command carrying `token` and wait for its answer. The caller bounds the wait.
pub async fn one(client: &reqwest::Client, base: &str, chats: &Chats, token: &str) -> Ending {
    let i = chats.next();
    let n = super::telegram::sender(i);
    let rx = chats.expect(token, CHATS_FROM + n);
    let body = json!({
        "id": format!("{}", 1_400_000_000_000_000_000u64 + i as u64),
        "application_id": APPLICATION, "type": 2, "token": token_of(n, i), "version": 1,
        "channel_id": format!("{}", 1_500_000_000_000_000_000i64 + n),
        "user": {"id": crate::faults::load::discord_member(n)},
        "data": {"name": "ask", "options": [{"name": "question", "type": 3, "value": token}]},
    })
    .to_string();
    let stamp = chrono::Utc::now().timestamp().to_string();
    let signature = verify::sign(&SEED, &stamp, body.as_bytes()).map_or_else(String::new, |s| s.1);
    let resp = client
        .post(format!("{base}/webhooks/discord"))
        .header("content-type", "application/json")
        .header(verify::TIMESTAMP, &stamp)
        .header(verify::SIGNATURE, signature)
        .body(body)
        .send()
        .await;
    chats.ended(token, resp, rx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_maps_to_a_chat_of_its_own_range() {
        assert_eq!(chat_of(&token_of(900_001, 7)), Some(50_900_001));
        assert_eq!(chat_of("other"), None);
        assert_eq!(public_key().len(), 64);
    }
}
