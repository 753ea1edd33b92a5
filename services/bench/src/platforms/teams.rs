//! Microsoft Teams: a personal message to the bot as the Bot Framework posts it (an activity
//! with an RS256 token, `hermes_channels::teams::verify::sign`), and a fake Connector whose
//! activities tell the sink, which also hands out the bot's token.
//!
//! The token is signed with the test key of the channels crate's fixtures, whose public half
//! the bench lists as the fleet's keys (`TEAMS_OPENID_KEYS`, a file beside the run's logs):
//! no key of Microsoft's is involved. One token serves the whole run, as the Connector
//! reuses its tokens for an hour.

use std::path::Path;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use hermes_channels::teams::verify;
use hermes_types::model::Platform;
use serde_json::{Value, json};

use super::{Message, Sink};

const APP_ID: &str = "00000000-0000-0000-0000-00000000b3c4";
const APP_PASSWORD: &str = "bench-teams-password";
/// The signing key (PKCS#1 DER) and its public half, as a JWKS document.
const KEY: &[u8] =
    include_bytes!("../../../../shared/channels/tests/fixtures/teams/test-signing-key.der");
const JWKS: &str = include_str!("../../../../shared/channels/tests/fixtures/teams/test-jwks.json");
const KID: &str = "test-key";

/// Member `n`'s Teams id.
pub fn member(n: i64) -> String {
    format!("29:B{n}")
}

/// The personal conversation with member `n`.
fn conversation(n: i64) -> String {
    format!("a:B{n}")
}

/// The member of a conversation the fleet posted to (its path segment, decoded).
fn member_of(conversation: &str) -> Option<i64> {
    super::member_after("a:B", conversation)
}

async fn activity<S: Sink>(
    State(sink): State<Arc<S>>,
    axum::extract::Path(conversation): axum::extract::Path<String>,
    body: axum::body::Bytes,
) -> (axum::http::StatusCode, axum::Json<Value>) {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    // Typing activities carry no text.
    if let (Some(n), Some(text)) = (member_of(&conversation), body["text"].as_str()) {
        sink.sent(super::chat(Platform::Teams, n), text);
    }
    let created = axum::http::StatusCode::CREATED;
    (created, axum::Json(json!({"id": "1"})))
}

async fn token() -> axum::Json<Value> {
    axum::Json(json!({"token_type": "Bearer", "expires_in": 3599, "access_token": "bench-teams"}))
}

/// The fake Connector and token endpoint, and what the bench sends with.
pub struct Connector {
    token_url: String,
    keys: String,
    /// The `serviceUrl` of its conversations.
    service_url: String,
    /// The Bot Framework's token for them.
    bearer: String,
}

/// Serve the fake Connector; write its keys to the file `keys` (`TEAMS_OPENID_KEYS`).
pub async fn serve<S: Sink>(sink: Arc<S>, keys: &Path) -> anyhow::Result<Connector> {
    std::fs::write(keys, JWKS)?;
    // The Connector escapes the conversation id whole, so it is one path segment.
    let routes = vec![
        (
            "/amer/v3/conversations/{conversation}/activities".to_string(),
            post(activity::<S>),
        ),
        ("/token".to_string(), post(token)),
    ];
    let base = super::fake::serve(routes, sink).await?;
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
        keys: keys.display().to_string(),
        service_url,
        bearer,
    })
}

impl Connector {
    /// The fleet's Teams settings.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("TEAMS_APP_ID", APP_ID.to_string()),
            ("TEAMS_APP_PASSWORD", APP_PASSWORD.to_string()),
            ("TEAMS_OPENID_KEYS", self.keys.clone()),
            ("TEAMS_TOKEN_URL", self.token_url.clone()),
            ("TEAMS_SERVICE_HOSTS", "127.0.0.1".to_string()),
        ]
    }

    /// `m` as the Bot Framework posts it to `post`.
    pub fn webhook(
        &self,
        post: reqwest::RequestBuilder,
        m: Message<'_>,
    ) -> reqwest::RequestBuilder {
        let body = json!({
            "type": "message", "id": format!("bench-{}", m.i), "channelId": "msteams",
            "timestamp": chrono::Utc::now().to_rfc3339(), "serviceUrl": self.service_url,
            "from": {"id": member(m.n)},
            "conversation": {"conversationType": "personal", "id": conversation(m.n)},
            "recipient": {"id": format!("28:{APP_ID}")}, "text": m.text,
        })
        .to_string();
        post.header("content-type", "application/json")
            .bearer_auth(&self.bearer)
            .body(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversation_names_its_member() {
        assert_eq!(member_of(&conversation(900_001)), Some(900_001));
        assert_eq!(member_of("a:C1"), None);
    }
}
