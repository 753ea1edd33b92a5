//! The Connector's requests as Teams documents them, against a fake Connector.

use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::*;
use crate::teams::token::tests::settings;

async fn token_endpoint(server: &MockServer, tokens: &[&str]) {
    for (i, t) in tokens.iter().enumerate() {
        Mock::given(method("POST"))
            .and(path("/token"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "token_type": "Bearer", "expires_in": 3599, "access_token": t
            })))
            .up_to_n_times(1)
            .with_priority(u8::try_from(i + 1).unwrap())
            .mount(server)
            .await;
    }
}

fn chat_id(server: &MockServer, conversation: &str) -> String {
    format!("{}/amer/|{conversation}", server.uri())
}

#[tokio::test]
async fn a_part_goes_to_its_conversation_with_the_bots_token_as_markdown_or_a_card() {
    hermes_net::install_crypto_provider();
    let server = MockServer::start().await;
    token_endpoint(&server, &["tok-1"]).await;
    Mock::given(method("POST"))
        .and(path("/amer/v3/conversations/a%3A1/activities"))
        .and(header("authorization", "Bearer tok-1"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": "act-9"})))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(
            "/amer/v3/conversations/19%3Ac%40thread.tacv2/activities/1700",
        ))
        .and(body_partial_json(
            json!({"replyToId": "1700", "type": "message"}),
        ))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": "act-10"})))
        .mount(&server)
        .await;
    let teams = Teams::new(&settings(&server), reqwest::Client::new());
    let p = RetryPolicy::fast();
    let text = Part::Text("**hi**".into());
    let id = teams
        .send(&p, &chat_id(&server, "a:1"), &text, None, |_| {})
        .await
        .unwrap();
    assert_eq!(id.as_deref(), Some("act-9"));
    let image = Part::Image {
        url: "https://example.com/a.png".into(),
        caption: Some("a sunset".into()),
    };
    let id = teams
        .send(
            &p,
            &chat_id(&server, "19:c@thread.tacv2"),
            &image,
            Some("1700"),
            |_| {},
        )
        .await
        .unwrap();
    assert_eq!(id.as_deref(), Some("act-10"));
    let sent: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path().contains("/activities"))
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert_eq!(
        sent[0],
        json!({"type": "message", "textFormat": "markdown", "text": "**hi**"})
    );
    let card = &sent[1]["attachments"][0];
    assert_eq!(card["contentType"], "application/vnd.microsoft.card.hero");
    assert_eq!(
        card["content"]["images"][0]["url"],
        "https://example.com/a.png"
    );
    assert_eq!(card["content"]["text"], "a sunset");
}

#[tokio::test]
async fn a_refused_token_is_renewed_once_and_an_unlisted_service_gets_nothing() {
    hermes_net::install_crypto_provider();
    let server = MockServer::start().await;
    token_endpoint(&server, &["old", "new"]).await;
    Mock::given(method("POST"))
        .and(path("/amer/v3/conversations/a%3A1/activities"))
        .and(header("authorization", "Bearer old"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/amer/v3/conversations/a%3A1/activities"))
        .and(header("authorization", "Bearer new"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": "ok"})))
        .mount(&server)
        .await;
    let teams = Teams::new(&settings(&server), reqwest::Client::new());
    let p = RetryPolicy::fast();
    let text = Part::Text("hi".into());
    let id = teams
        .send(&p, &chat_id(&server, "a:1"), &text, None, |_| {})
        .await
        .unwrap();
    assert_eq!(id.as_deref(), Some("ok"));

    let elsewhere = "https://attacker.example/|a:1";
    let f = teams
        .send(&p, elsewhere, &text, None, |_| {})
        .await
        .unwrap_err();
    assert_eq!((f.reason, f.tries), (FailureReason::AddressRefused, 0));
    let f = teams
        .send(&p, "a:1", &text, None, |_| {})
        .await
        .unwrap_err();
    assert_eq!((f.reason, f.tries), (FailureReason::InvalidRecipient, 0));
}

#[tokio::test]
async fn a_missing_conversation_is_a_bad_recipient_and_throttling_is_waited() {
    hermes_net::install_crypto_provider();
    let server = MockServer::start().await;
    token_endpoint(&server, &["tok"]).await;
    Mock::given(method("POST"))
        .and(path("/amer/v3/conversations/gone/activities"))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({
            "error": {"code": "ConversationNotFound", "message": "Conversation not found."}
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/amer/v3/conversations/busy/activities"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/amer/v3/conversations/busy/activities"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!({"id": "x"})))
        .mount(&server)
        .await;
    let teams = Teams::new(&settings(&server), reqwest::Client::new());
    let p = RetryPolicy::fast();
    let text = Part::Text("hi".into());
    let f = teams
        .send(&p, &chat_id(&server, "gone"), &text, None, |_| {})
        .await
        .unwrap_err();
    assert_eq!(f.reason, FailureReason::InvalidRecipient);
    assert!(f.body.unwrap_or_default().contains("ConversationNotFound"));
    let mut seen = Vec::new();
    teams
        .send(&p, &chat_id(&server, "busy"), &text, None, |r| seen.push(r))
        .await
        .unwrap();
    assert_eq!(seen, [FailureReason::RateLimited]);
}
