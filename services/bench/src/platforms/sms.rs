//! SMS through Twilio: an incoming SMS as Twilio posts it (a form signed into
//! `X-Twilio-Signature` over the configured webhook URL by
//! `hermes_channels::twilio::verify`, Twilio's own scheme), and a fake Messaging API whose
//! `Messages.json` tells the sink.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use hermes_channels::twilio::verify;
use hermes_types::model::Platform;
use serde_json::json;

use super::{Message, Sink};

const ACCOUNT_SID: &str = "ACbench0000000000000000000000000000";
const AUTH_TOKEN: &str = "bench-twilio-auth-token";
/// The number the fleet answers from.
const FROM: &str = "+15550000000";

/// Member `n`'s number.
pub fn member(n: i64) -> String {
    format!("+1555{n:07}")
}

/// The member of a number the fleet sent to.
fn member_of(number: &str) -> Option<i64> {
    super::member_after("+1555", number)
}

/// The webhook URL Twilio is configured with (`TWILIO_WEBHOOK_URL`) for ingest at `base`.
fn webhook_url(base: &str) -> String {
    format!("{base}/webhooks/twilio")
}

async fn send<S: Sink>(
    State(sink): State<Arc<S>>,
    body: axum::body::Bytes,
) -> (StatusCode, axum::Json<serde_json::Value>) {
    let form = verify::form_params(&body);
    let field = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    };
    if let Some(n) = member_of(field("To")) {
        sink.sent(super::chat(Platform::Sms, n), field("Body"));
    }
    let answer = json!({"sid": "SMbench", "status": "queued"});
    (StatusCode::CREATED, axum::Json(answer))
}

/// Serve the fake Messaging API; its base URL (`TWILIO_API_BASE_URL`).
pub async fn serve<S: Sink>(sink: Arc<S>) -> anyhow::Result<String> {
    let path = format!("/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json");
    super::fake::serve(vec![(path, post(send::<S>))], sink).await
}

/// The fleet's Twilio settings, its Messaging API at `api` and its ingest at `ingest`.
pub fn env(api: &str, ingest: &str) -> Vec<(&'static str, String)> {
    vec![
        ("TWILIO_ACCOUNT_SID", ACCOUNT_SID.to_string()),
        ("TWILIO_AUTH_TOKEN", AUTH_TOKEN.to_string()),
        ("TWILIO_FROM_NUMBER", FROM.to_string()),
        ("TWILIO_API_BASE_URL", api.to_string()),
        ("TWILIO_WEBHOOK_URL", webhook_url(ingest)),
    ]
}

/// `m` as Twilio posts it to ingest at `base`.
pub fn webhook(client: &reqwest::Client, base: &str, m: Message<'_>) -> reqwest::RequestBuilder {
    let params: Vec<(String, String)> = [
        ("AccountSid", ACCOUNT_SID.to_string()),
        ("MessageSid", format!("SMbench{:026}", m.i)),
        ("From", member(m.n)),
        ("To", FROM.to_string()),
        ("Body", m.text.to_string()),
        ("NumMedia", "0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    // Twilio signs the URL it posts to, which must be the one configured for ingest.
    let url = webhook_url(base);
    let signature = verify::signature(AUTH_TOKEN.as_bytes(), &url, &params);
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(&params)
        .finish();
    client
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-twilio-signature", signature)
        .body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_names_its_member() {
        assert_eq!(member_of(&member(900_001)), Some(900_001));
        assert_eq!(member_of("+14155550100"), None);
    }
}
