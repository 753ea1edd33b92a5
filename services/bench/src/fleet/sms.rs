//! The SMS kind of `hermes bench fleet`: an incoming SMS from one of the seeded users' linked
//! numbers, posted as Twilio posts it (a form signed into `X-Twilio-Signature` over the
//! configured webhook URL by `hermes_channels::twilio::verify`, Twilio's own scheme), answered
//! when the fleet's `Messages.json` send carrying its token reaches a fake Messaging API on
//! loopback. It adds Twilio's signature check, keywords, segmenting and sender to the path;
//! the ledger ([`Chats`]) is shared with the other chat kinds.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use hermes_channels::twilio::verify;
use serde_json::json;

use super::ledger::{Chats, serve_fake};
use super::load::Ending;

/// The account and auth token of the fleet under test, and the number it answers from.
pub const ACCOUNT_SID: &str = "ACbench0000000000000000000000000000";
pub const AUTH_TOKEN: &str = "bench-fleet-twilio-auth-token";
pub const FROM: &str = "+15550000000";
/// Where SMS chats sit in the ledger, apart from the other kinds'.
const CHATS_FROM: i64 = 20_000_000;

/// The webhook URL Twilio is configured with (`TWILIO_WEBHOOK_URL`) for ingest at `base`.
pub fn webhook_url(base: &str) -> String {
    format!("{base}/webhooks/twilio")
}

/// The ledger's chat of a number the fleet sent to.
fn chat_of(number: &str) -> Option<i64> {
    crate::faults::load::sms_sender(number).map(|n| CHATS_FROM + n)
}

async fn send(
    State(chats): State<Arc<Chats>>,
    body: axum::body::Bytes,
) -> (StatusCode, axum::Json<serde_json::Value>) {
    let form = verify::form_params(&body);
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    };
    if let Some(chat) = chat_of(field("To")) {
        chats.sent(chat, field("Body"));
    }
    let answer = json!({"sid": "SMbench", "status": "queued"});
    (StatusCode::CREATED, axum::Json(answer))
}

/// Serve the fake Messaging API; returns its base URL (`TWILIO_API_BASE_URL`).
pub async fn serve(chats: Arc<Chats>) -> anyhow::Result<String> {
    let base = serve_fake(
        &format!("/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json"),
        post(send),
        chats,
    )
    .await?;
    Ok(base)
}

/// Send one SMS carrying `token` and wait for its answer. The caller bounds the wait.
pub async fn one(client: &reqwest::Client, base: &str, chats: &Chats, token: &str) -> Ending {
    let i = chats.next();
    let n = super::telegram::sender(i);
    let rx = chats.expect(token, CHATS_FROM + n);
    let params: Vec<(String, String)> = [
        ("AccountSid", ACCOUNT_SID.to_string()),
        ("MessageSid", format!("SMbench{i:026}")),
        ("From", crate::faults::load::sms_number(n)),
        ("To", FROM.to_string()),
        ("Body", token.to_string()),
        ("NumMedia", "0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let url = webhook_url(base);
    let signature = verify::signature(AUTH_TOKEN.as_bytes(), &url, &params);
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&params)
        .finish();
    let resp = client
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-twilio-signature", signature)
        .body(body)
        .send()
        .await;
    chats.ended(token, resp, rx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_maps_to_a_chat_of_its_own_range() {
        let number = crate::faults::load::sms_number(900_001);
        assert_eq!(chat_of(&number), Some(20_900_001));
        assert_eq!(chat_of("+14155550100"), None);
    }
}
