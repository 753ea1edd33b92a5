//! WhatsApp through Meta's Cloud API: a message as the Cloud API posts its webhook (signed
//! into `X-Hub-Signature-256` with the app secret), and a fake Cloud API whose
//! `/{phone number id}/messages` tells the sink of each text (read receipts and typing
//! indicators, posted to the same path, carry none).

use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use hermes_channels::meta::verify;
use hermes_types::model::Platform;
use serde_json::{Value, json};

use super::{Message, Sink};

const APP_SECRET: &str = "bench-whatsapp-app-secret";
const ACCESS_TOKEN: &str = "bench-whatsapp-token";
const PHONE_NUMBER_ID: &str = "5550001";

/// Member `n`'s WhatsApp id (a phone number without its `+`).
pub fn member(n: i64) -> String {
    format!("1666{n:07}")
}

/// The member of a WhatsApp id the fleet sent to.
fn member_of(wa_id: &str) -> Option<i64> {
    super::member_after("1666", wa_id)
}

async fn send<S: Sink>(State(sink): State<Arc<S>>, body: axum::body::Bytes) -> axum::Json<Value> {
    let body = serde_json::from_slice::<Value>(&body).unwrap_or_default();
    let to = body["to"].as_str().unwrap_or_default();
    if let (Some(n), Some(text)) = (member_of(to), body["text"]["body"].as_str()) {
        sink.sent(super::chat(Platform::Whatsapp, n), text);
    }
    axum::Json(json!({
        "messaging_product": "whatsapp",
        "contacts": [{"input": to, "wa_id": to}],
        "messages": [{"id": "wamid.bench"}]
    }))
}

/// Serve the fake Cloud API; its base URL (`WHATSAPP_API_BASE_URL`).
pub async fn serve<S: Sink>(sink: Arc<S>) -> anyhow::Result<String> {
    let route = (
        format!("/v21.0/{PHONE_NUMBER_ID}/messages"),
        post(send::<S>),
    );
    Ok(format!(
        "{}/v21.0",
        super::fake::serve(vec![route], sink).await?
    ))
}

/// The fleet's WhatsApp settings, its Cloud API at `api`.
pub fn env(api: &str) -> Vec<(&'static str, String)> {
    vec![
        ("WHATSAPP_APP_SECRET", APP_SECRET.to_string()),
        ("WHATSAPP_ACCESS_TOKEN", ACCESS_TOKEN.to_string()),
        ("WHATSAPP_PHONE_NUMBER_ID", PHONE_NUMBER_ID.to_string()),
        ("WHATSAPP_API_BASE_URL", api.to_string()),
    ]
}

/// `m` as the Cloud API posts it to `post`.
pub fn webhook(post: reqwest::RequestBuilder, m: Message<'_>) -> reqwest::RequestBuilder {
    let from = member(m.n);
    let body = json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA_BENCH", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550001111", "phone_number_id": PHONE_NUMBER_ID},
            "contacts": [{"profile": {"name": "Bench"}, "wa_id": from}],
            "messages": [{
                "from": from, "id": format!("wamid.bench{}", m.i),
                "timestamp": chrono::Utc::now().timestamp().to_string(),
                "type": "text", "text": {"body": m.text}
            }]
        }}]}]
    })
    .to_string();
    let signature = verify::sign_hub(APP_SECRET.as_bytes(), body.as_bytes());
    post.header("content-type", "application/json")
        .header("x-hub-signature-256", signature)
        .body(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whatsapp_id_names_its_member() {
        assert_eq!(member_of(&member(900_001)), Some(900_001));
        assert_eq!(member_of("15551234567"), None);
    }
}
