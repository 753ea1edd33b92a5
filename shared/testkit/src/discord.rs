//! A fake of Discord's REST API for the tests (docs/channels.md, "Discord"): the interaction
//! webhook's edit of the deferred response (`PATCH /webhooks/{app}/{token}/messages/@original`)
//! and follow-ups (`POST /webhooks/{app}/{token}`), and channel messages
//! (`POST /channels/{id}/messages`) and the typing indicator (`POST /channels/{id}/typing`),
//! each answered with a new message and rate-limit bucket
//! headers as Discord sends them; a `429` with `retry_after` and a `404 Unknown Webhook` (an
//! expired token) for the tests that need them. Every call is recorded ([`discord_calls`]).

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockBuilder, MockServer, Request, Respond, ResponseTemplate};

/// The path under the fake's URI that stands for `https://discord.com/api/v10`.
const API: &str = "/api/v10";

/// A call the fleet made to the fake.
#[derive(Clone, Debug, PartialEq)]
pub struct DiscordCall {
    /// `PATCH` or `POST`.
    pub method: String,
    /// The path below the API's base (`/webhooks/2200/tok/messages/@original`).
    pub path: String,
    /// The JSON body.
    pub body: Value,
    /// The `Authorization` header, when one was sent.
    pub authorization: Option<String>,
}

/// The calls on `route` of a Discord fake: `"original"` (the edit of the deferred
/// response), `"followup"`, `"channel"` or `"typing"` (the typing indicator); add matchers, then `respond_with` and mount (at a
/// priority below 10 to come before [`discord_fake`]'s own answers).
pub fn discord_route(route: &str) -> MockBuilder {
    let (verb, path) = match route {
        "original" => (
            "PATCH",
            r"^/api/v10/webhooks/\d+/[A-Za-z0-9._-]+/messages/@original$",
        ),
        "followup" => ("POST", r"^/api/v10/webhooks/\d+/[A-Za-z0-9._-]+$"),
        "channel" => ("POST", r"^/api/v10/channels/\d+/messages$"),
        "typing" => ("POST", r"^/api/v10/channels/\d+/typing$"),
        other => panic!("no Discord route {other:?}"),
    };
    Mock::given(method(verb)).and(path_regex(path))
}

/// Discord's answers to a message created or edited: the message, with a new id, and its
/// bucket's headers (plenty left).
pub struct DiscordOk(AtomicU64);

impl Respond for DiscordOk {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        let content =
            (req.body_json::<Value>().ok()).and_then(|b| b["content"].as_str().map(str::to_owned));
        ResponseTemplate::new(200)
            .insert_header("x-ratelimit-bucket", "fake-bucket")
            .insert_header("x-ratelimit-limit", "5")
            .insert_header("x-ratelimit-remaining", "4")
            .insert_header("x-ratelimit-reset-after", "1.000")
            .set_body_json(
                json!({"id": format!("{}", 1_300_000_000_000_000_000u64 + n),
                                  "content": content}),
            )
    }
}

/// The answer of a call Discord accepted.
pub fn discord_ok() -> DiscordOk {
    DiscordOk(AtomicU64::new(1))
}

/// Discord's `429` on a spent bucket: `retry_after` seconds in the body and `Retry-After`
/// (whole seconds, rounded up) in the headers, with the bucket's headers.
pub fn discord_rate_limited(retry_after: f64) -> ResponseTemplate {
    ResponseTemplate::new(429)
        .insert_header("retry-after", format!("{}", retry_after.ceil() as u64))
        .insert_header("x-ratelimit-bucket", "fake-bucket")
        .insert_header("x-ratelimit-limit", "5")
        .insert_header("x-ratelimit-remaining", "0")
        .insert_header("x-ratelimit-reset-after", format!("{retry_after:.3}"))
        .insert_header("x-ratelimit-scope", "user")
        .set_body_json(json!({"message": "You are being rate limited.",
                              "retry_after": retry_after, "global": false}))
}

/// Discord's answer on an interaction webhook whose token has expired: `404 Unknown Webhook`.
pub fn discord_unknown_webhook() -> ResponseTemplate {
    ResponseTemplate::new(404).set_body_json(json!({"message": "Unknown Webhook", "code": 10015}))
}

/// A fake Discord API accepting every edit, follow-up and channel message; pass
/// [`discord_api_url`] as `DISCORD_API_URL`.
pub async fn discord_fake() -> MockServer {
    let server = MockServer::start().await;
    for route in ["original", "followup", "channel"] {
        discord_route(route)
            .respond_with(discord_ok())
            .with_priority(10)
            .mount(&server)
            .await;
    }
    // The typing indicator: Discord answers 204 No Content.
    discord_route("typing")
        .respond_with(ResponseTemplate::new(204))
        .with_priority(10)
        .mount(&server)
        .await;
    server
}

/// The `DISCORD_API_URL` of a Discord fake.
pub fn discord_api_url(server: &MockServer) -> String {
    format!("{}{API}", server.uri())
}

/// Every call a Discord fake received, in order.
pub async fn discord_calls(server: &MockServer) -> Vec<DiscordCall> {
    let requests = server.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .map(|r| DiscordCall {
            method: r.method.to_string(),
            path: r
                .url
                .path()
                .strip_prefix(API)
                .unwrap_or(r.url.path())
                .to_owned(),
            body: serde_json::from_slice(&r.body).unwrap_or(Value::Null),
            authorization: (r.headers.get("authorization"))
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        })
        .collect()
}
