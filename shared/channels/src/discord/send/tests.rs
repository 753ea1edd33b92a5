//! The sender against a mock of Discord's API: an answer edits the deferred response and
//! follows up, an expired token goes to the channel or is parked, a spent bucket and a 429
//! are waited out.

use std::time::Duration;

use chrono::TimeDelta;
use hermes_types::model::InteractionToken;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;

fn discord(server: &MockServer, bot_token: Option<&str>) -> Discord {
    hermes_net::install_crypto_provider();
    let settings = DiscordSender {
        bot_token: bot_token.map(|t| SecretString::from(t.to_string())),
        api_url: format!("{}/api/v10", server.uri()).parse().unwrap(),
    };
    Discord::new(&settings, reqwest::Client::new())
}

fn interaction(age: TimeDelta) -> Interaction {
    Interaction::received("2002", InteractionToken::new("tok-1"), Utc::now() - age)
}

fn text(s: &str) -> Part {
    Part::Text(s.into())
}

#[tokio::test]
async fn the_first_part_edits_the_deferred_response_and_the_rest_follow_up() {
    let server = MockServer::start().await;
    Mock::given(method("PATCH"))
        .and(path("/api/v10/webhooks/2002/tok-1/messages/@original"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": "900"})))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/v10/webhooks/2002/tok-1"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": "901"})))
        .expect(1)
        .mount(&server)
        .await;
    let d = discord(&server, None);
    let i = interaction(TimeDelta::zero());
    let p = RetryPolicy::fast();
    let first = d
        .answer(&p, &i, "4", 0, &text("hi @everyone"), |_| {})
        .await;
    assert_eq!(first.unwrap().as_deref(), Some("900"));
    let second = d.answer(&p, &i, "4", 1, &text("more"), |_| {}).await;
    assert_eq!(second.unwrap().as_deref(), Some("901"));
    let sent = server.received_requests().await.unwrap();
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(
        body,
        json!({"content": "hi @everyone", "allowed_mentions": {"parse": []}})
    );
    assert!(
        sent.iter()
            .all(|r| !r.headers.contains_key("authorization"))
    );
}

#[tokio::test]
async fn an_expired_token_goes_to_the_channel_with_the_bot_token_or_is_parked() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v10/channels/4/messages"))
        .and(header("authorization", "Bot bot-secret"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": "902"})))
        .mount(&server)
        .await;
    let old = interaction(TimeDelta::minutes(16));
    let p = RetryPolicy::fast();
    let with_bot = discord(&server, Some("bot-secret"));
    let id = with_bot
        .answer(&p, &old, "4", 0, &text("late"), |_| {})
        .await;
    assert_eq!(id.unwrap().as_deref(), Some("902"));
    let without = discord(&server, None);
    let f = without
        .answer(&p, &old, "4", 0, &text("late"), |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        (f.reason, f.detail.as_str()),
        (FailureReason::InvalidRecipient, EXPIRED)
    );
    let f = without
        .send(&p, "4", &text("x"), None, |_| {})
        .await
        .unwrap_err();
    assert_eq!(f.reason, FailureReason::NoSender);
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn unknown_webhook_is_an_expired_token_parked_with_discords_code() {
    let server = MockServer::start().await;
    Mock::given(method("PATCH"))
        .respond_with(
            ResponseTemplate::new(404)
                .set_body_json(json!({"message": "Unknown Webhook", "code": 10015})),
        )
        .mount(&server)
        .await;
    let d = discord(&server, None);
    let f = d
        .answer(
            &RetryPolicy::fast(),
            &interaction(TimeDelta::zero()),
            "4",
            0,
            &text("hi"),
            |_| {},
        )
        .await
        .unwrap_err();
    assert_eq!(f.reason, FailureReason::InvalidRecipient);
    assert!(f.detail.starts_with(EXPIRED), "{}", f.detail);
    assert!(f.detail.contains("10015 Unknown Webhook"), "{}", f.detail);
    assert!(!f.detail.contains("tok-1"), "{}", f.detail);
}

#[tokio::test]
async fn a_429_waits_its_retry_after_and_a_spent_bucket_its_reset() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("x-ratelimit-bucket", "b1")
                .insert_header("x-ratelimit-remaining", "0")
                .insert_header("x-ratelimit-reset-after", "0.3")
                .set_body_json(json!({"message": "You are being rate limited.", "retry_after": 0.3, "global": false})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("x-ratelimit-bucket", "b1")
                .insert_header("x-ratelimit-remaining", "0")
                .insert_header("x-ratelimit-reset-after", "0.4")
                .set_body_json(json!({"id": "903"})),
        )
        .mount(&server)
        .await;
    let d = discord(&server, Some("bot-secret"));
    let p = RetryPolicy::fast();
    let started = Instant::now();
    let mut seen = Vec::new();
    let id = d.send(&p, "4", &text("hi"), None, |r| seen.push(r)).await;
    assert_eq!(id.unwrap().as_deref(), Some("903"));
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(seen, [FailureReason::RateLimited]);
    // The bucket is spent: the next send waits for its reset rather than draw a 429.
    let started = Instant::now();
    d.send(&p, "4", &text("again"), None, |_| {}).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(350));
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn an_image_is_an_embed_and_a_bad_channel_sends_nothing() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": "904"})))
        .mount(&server)
        .await;
    let d = discord(&server, Some("bot-secret"));
    let image = Part::Image {
        url: "https://example.com/a.png".into(),
        caption: Some("a sunset".into()),
    };
    let p = RetryPolicy::fast();
    d.send(&p, "4", &image, None, |_| {}).await.unwrap();
    let f = d
        .send(&p, "../4", &text("x"), None, |_| {})
        .await
        .unwrap_err();
    assert_eq!((f.reason, f.tries), (FailureReason::InvalidRecipient, 0));
    let sent = server.received_requests().await.unwrap();
    assert_eq!(sent.len(), 1);
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(
        body["embeds"][0]["image"]["url"],
        "https://example.com/a.png"
    );
    assert_eq!(body["content"], "a sunset");
}
