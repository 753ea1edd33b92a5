//! Twilio in tests (docs/channels.md, "SMS through Twilio"): a fake of its Messages API that
//! answers every send with a new message SID, as Twilio does; the form bodies it received; and
//! webhooks posted to a fleet signed as Twilio signs them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use hermes_channels::twilio::verify::{TWILIO_SIGNATURE, signature};
use wiremock::{Request, Respond, ResponseTemplate};

use crate::App;

/// The account the fake serves.
pub const TWILIO_SID: &str = "AC00000000000000000000000000000000";
/// Its auth token.
pub const TWILIO_TOKEN: &str = "twilio-auth-token-0123456789";
/// The number replies go from.
pub const TWILIO_FROM: &str = "+15558675310";

/// Answers a send as Twilio does: 201 with a new `SM…` SID each time.
pub struct TwilioCreated(AtomicU64);

impl Respond for TwilioCreated {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        ResponseTemplate::new(201).set_body_json(serde_json::json!({
            "sid": format!("SM{n:032x}"),
            "status": "queued",
        }))
    }
}

/// A new [`TwilioCreated`].
pub fn twilio_created() -> TwilioCreated {
    TwilioCreated(AtomicU64::new(1))
}

/// The Messages API's create of [`TWILIO_SID`], before its answer: add matchers, then
/// `respond_with` ([`twilio_created`] or a failure) and mount.
pub fn twilio_messages() -> wiremock::MockBuilder {
    wiremock::Mock::given(wiremock::matchers::method("POST")).and(wiremock::matchers::path(
        format!("/2010-04-01/Accounts/{TWILIO_SID}/Messages.json"),
    ))
}

/// A fake Twilio API accepting every send; pass its `uri()` as `TWILIO_API_BASE_URL`.
pub async fn twilio_fake() -> wiremock::MockServer {
    let server = wiremock::MockServer::start().await;
    twilio_messages()
        .respond_with(twilio_created())
        .mount(&server)
        .await;
    server
}

/// The forms of every send the fake received, in order.
pub async fn twilio_sent(api: &wiremock::MockServer) -> Vec<HashMap<String, String>> {
    api.received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path().ends_with("/Messages.json"))
        .map(|r| url::form_urlencoded::parse(&r.body).into_owned().collect())
        .collect()
}

/// The parameters Twilio posts for an SMS `body` from `from` (message `sid`).
pub fn twilio_sms(sid: &str, from: &str, body: &str) -> Vec<(String, String)> {
    [
        ("MessageSid", sid),
        ("SmsSid", sid),
        ("AccountSid", TWILIO_SID),
        ("From", from),
        ("To", TWILIO_FROM),
        ("Body", body),
        ("NumMedia", "0"),
        ("NumSegments", "1"),
        ("SmsStatus", "received"),
        ("ApiVersion", "2010-04-01"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

impl App {
    /// POST the form `params` to `/webhooks/twilio` with `signature` in
    /// `X-Twilio-Signature`; the raw answer.
    pub async fn twilio_post(
        &self,
        params: &[(String, String)],
        signature: &str,
    ) -> reqwest::Response {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        self.post("/webhooks/twilio")
            .header("content-type", "application/x-www-form-urlencoded")
            .header(TWILIO_SIGNATURE, signature)
            .body(body)
            .send()
            .await
            .expect("ingest answers")
    }

    /// POST `params` to `/webhooks/twilio` signed with [`TWILIO_TOKEN`] over `public_url`,
    /// as Twilio does; the raw answer.
    pub async fn twilio_webhook(
        &self,
        public_url: &str,
        params: &[(String, String)],
    ) -> reqwest::Response {
        let signed = signature(TWILIO_TOKEN.as_bytes(), public_url, params);
        self.twilio_post(params, &signed).await
    }
}
