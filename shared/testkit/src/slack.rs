//! A fake of Slack for the tests: Events API requests as Slack signs and sends them, and the
//! Web API methods the fleet calls (`chat.postMessage`, `chat.update`, `url_private` files)
//! answered as Slack does (docs/channels.md, "Slack").

use std::sync::atomic::{AtomicU64, Ordering};

use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockBuilder, MockServer, Request, Respond, ResponseTemplate};

/// The bot user of the fake workspace (`authorizations[0].user_id`).
pub const SLACK_BOT_USER: &str = "U0BOT00001";

/// The headers Slack sends `body` with, signed with `signing_secret` now: `X-Slack-Signature`
/// (`v0=` HMAC-SHA256 of `v0:{timestamp}:{body}`) and `X-Slack-Request-Timestamp`.
pub fn slack_headers(signing_secret: &str, body: &[u8]) -> Vec<(&'static str, String)> {
    slack_headers_at(signing_secret, body, chrono::Utc::now().timestamp())
}

/// [`slack_headers`] at the Unix time `timestamp`.
pub fn slack_headers_at(
    signing_secret: &str,
    body: &[u8],
    timestamp: i64,
) -> Vec<(&'static str, String)> {
    let ts = timestamp.to_string();
    let mut mac = Hmac::<Sha256>::new_from_slice(signing_secret.as_bytes()).expect("any key");
    mac.update(format!("v0:{ts}:").as_bytes());
    mac.update(body);
    let sig = format!("v0={}", hex::encode(mac.finalize().into_bytes()));
    vec![
        ("x-slack-signature", sig),
        ("x-slack-request-timestamp", ts),
    ]
}

/// An `event_callback` envelope carrying `event` as event `event_id`.
pub fn slack_event(event_id: &str, event: Value) -> Value {
    json!({
        "token": "verification-token-unused",
        "team_id": "T0TEAM0001",
        "api_app_id": "A0APP00001",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1_760_000_000,
        "authorizations": [{"enterprise_id": null, "team_id": "T0TEAM0001",
                            "user_id": SLACK_BOT_USER, "is_bot": true}]
    })
}

/// A direct message (`message.im`) from `user` in `channel`, written at `ts`.
pub fn slack_dm(event_id: &str, user: &str, channel: &str, ts: &str, text: &str) -> Value {
    slack_event(
        event_id,
        json!({"type": "message", "channel": channel, "channel_type": "im", "user": user,
               "text": text, "ts": ts, "event_ts": ts}),
    )
}

/// An `app_mention` of the bot by `user` at the top level of `channel`, written at `ts`.
pub fn slack_mention(event_id: &str, user: &str, channel: &str, ts: &str, text: &str) -> Value {
    slack_event(
        event_id,
        json!({"type": "app_mention", "channel": channel, "user": user, "ts": ts,
               "event_ts": ts, "text": format!("<@{SLACK_BOT_USER}> {text}")}),
    )
}

/// Web API method `name` (`chat.postMessage`, …) on a Slack fake, called with the bot token
/// `token`: add matchers, then `respond_with` and mount.
pub fn slack_method(name: &str, token: &str) -> MockBuilder {
    Mock::given(method("POST"))
        .and(path(format!("/api/{name}")))
        .and(header("authorization", format!("Bearer {token}")))
}

/// Slack's `ok` answers to posts, each naming a new `ts`, as Slack does.
pub struct SlackOk(AtomicU64);

impl Respond for SlackOk {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        let channel = req
            .body_json::<Value>()
            .ok()
            .and_then(|b| b["channel"].as_str().map(str::to_string));
        ResponseTemplate::new(200).set_body_json(json!({
            "ok": true, "channel": channel, "ts": format!("1760000100.{n:06}"),
        }))
    }
}

/// The answer of a Slack method that accepted the call.
pub fn slack_ok() -> SlackOk {
    SlackOk(AtomicU64::new(1))
}

/// The `ok: false` answer of a refused call, with Slack's `error` code.
pub fn slack_refusal(code: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": code}))
}

/// A fake Slack Web API answering `chat.postMessage` and `chat.update` of the bot `token`
/// with `ok`; pass `{uri}/api` as `SLACK_API_BASE_URL` ([`slack_api_base`]).
pub async fn slack_fake(token: &str) -> MockServer {
    let server = MockServer::start().await;
    for name in ["chat.postMessage", "chat.update"] {
        slack_method(name, token)
            .respond_with(slack_ok())
            .mount(&server)
            .await;
    }
    server
}

/// The `SLACK_API_BASE_URL` of a Slack fake.
pub fn slack_api_base(server: &MockServer) -> String {
    format!("{}/api", server.uri())
}

/// The bodies of every `chat.postMessage` a Slack fake received, in order.
pub async fn slack_posts(api: &MockServer) -> Vec<Value> {
    api.received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path().ends_with("/chat.postMessage"))
        .filter_map(|r| serde_json::from_slice(&r.body).ok())
        .collect()
}
