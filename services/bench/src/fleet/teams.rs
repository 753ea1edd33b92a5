//! The Teams kind of `hermes bench fleet`: a personal message to the bot from one of the
//! seeded users' linked Teams ids, posted as the Bot Framework posts it (an activity with an
//! RS256 token, `hermes_channels::teams::verify::sign`), answered when the fleet's activity
//! carrying its token reaches a fake Connector on loopback, which also hands out the bot's
//! token. It adds the JWT check, the Teams parser, the token cache and the Connector sender
//! to the path; the ledger ([`Chats`]) is shared with the other chat kinds.
//!
//! The token is signed with the test key of the channels crate's fixtures, whose public half
//! the bench lists as the fleet's keys (`TEAMS_OPENID_KEYS`, a file in the run's logs): no
//! key of Microsoft's is involved. One token serves the whole run, as the Connector reuses
//! its tokens for an hour.

use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use hermes_channels::teams::verify;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use super::ledger::Chats;
use super::load::Ending;

/// The bot's app id and password in the fleet under test.
pub const APP_ID: &str = "00000000-0000-0000-0000-00000000b3c4";
pub const APP_PASSWORD: &str = "bench-fleet-teams-password";
/// The signing key (PKCS#1 DER) and its public half, as a JWKS document.
const KEY: &[u8] =
    include_bytes!("../../../../shared/channels/tests/fixtures/teams/test-signing-key.der");
const JWKS: &str = include_str!("../../../../shared/channels/tests/fixtures/teams/test-jwks.json");
const KID: &str = "test-key";
/// Where Teams' chats sit in the ledger, apart from the other kinds'.
const CHATS_FROM: i64 = 40_000_000;

/// The personal conversation with member `n`.
fn conversation(n: i64) -> String {
    format!("a:B{n}")
}

/// The ledger's chat of a conversation the fleet posted to (its path segment, decoded).
fn chat_of(conversation: &str) -> Option<i64> {
    let n: i64 = conversation.strip_prefix("a:B")?.parse().ok()?;
    Some(CHATS_FROM + n)
}

async fn activity(
    State(chats): State<Arc<Chats>>,
    axum::extract::Path(conversation): axum::extract::Path<String>,
    body: axum::body::Bytes,
) -> (axum::http::StatusCode, axum::Json<Value>) {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    // Typing activities carry no text.
    if let (Some(chat), Some(text)) = (chat_of(&conversation), body["text"].as_str()) {
        chats.sent(chat, text);
    }
    (
        axum::http::StatusCode::CREATED,
        axum::Json(json!({"id": "1"})),
    )
}

async fn token() -> axum::Json<Value> {
    axum::Json(json!({"token_type": "Bearer", "expires_in": 3599, "access_token": "bench-teams"}))
}

/// The fake Connector and token endpoint, and what the bench sends with.
pub struct Connector {
    /// `TEAMS_TOKEN_URL`.
    pub token_url: String,
    /// The `serviceUrl` of its conversations.
    service_url: String,
    /// The Bot Framework's token for them.
    bearer: String,
}

/// Serve the fake Connector; write the keys to `TEAMS_OPENID_KEYS`'s file `keys`.
pub async fn serve(chats: Arc<Chats>, keys: &Path) -> anyhow::Result<Connector> {
    std::fs::write(keys, JWKS)?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    // The Connector escapes the conversation id whole, so it is one path segment.
    let app = Router::new()
        .route(
            "/amer/v3/conversations/{conversation}/activities",
            post(activity),
        )
        .route("/token", post(token))
        .with_state(chats);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let service_url = format!("{base}/amer/");
    let now = chrono::Utc::now().timestamp();
    let claims = json!({
        "iss": verify::ISSUER, "aud": APP_ID, "serviceurl": service_url,
        "nbf": now - 60, "exp": now + 24 * 3600,
    });
    let bearer = verify::sign(KEY, KID, &claims)
        .ok_or_else(|| anyhow::anyhow!("the bench's Teams key does not read"))?;
    Ok(Connector {
        token_url: format!("{base}/token"),
        service_url,
        bearer,
    })
}

/// Send one personal message carrying `token` and wait for its answer. The caller bounds the
/// wait.
pub async fn one(
    client: &reqwest::Client,
    base: &str,
    chats: &Chats,
    connector: &Connector,
    token: &str,
) -> Ending {
    let i = chats.next();
    let n = super::telegram::sender(i);
    let rx = chats.expect(token, CHATS_FROM + n);
    let body = json!({
        "type": "message", "id": format!("bench-{i}"), "channelId": "msteams",
        "timestamp": chrono::Utc::now().to_rfc3339(), "serviceUrl": connector.service_url,
        "from": {"id": crate::faults::load::teams_member(n)},
        "conversation": {"conversationType": "personal", "id": conversation(n)},
        "recipient": {"id": format!("28:{APP_ID}")}, "text": token,
    })
    .to_string();
    let resp = client
        .post(format!("{base}/webhooks/teams"))
        .header("content-type", "application/json")
        .bearer_auth(&connector.bearer)
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
        assert_eq!(chat_of(&conversation(900_001)), Some(40_900_001));
        assert_eq!(chat_of("a:C1"), None);
        assert_eq!(conversation(7), "a:B7");
    }
}
