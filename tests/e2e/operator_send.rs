//! `messages_send` (docs/operator-mcp.md, messages_send): a message to a known Telegram
//! chat reaches Telegram once, also when the call is retried with its idempotency key,
//! shows in the conversation's history and as an outbound `message` event; an unknown chat
//! is refused; a send Telegram refuses for good closes failed with a `delivery_failed`
//! event; and a key over its rate is refused with the time to wait.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{eventually, telegram_send_message, telegram_texts_to};
use hermes_types::ids::RunId;
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::ResponseTemplate;
use wiremock::matchers::body_partial_json;

use crate::agent_mcp::{TG_TOKEN, env_with, peer};
use crate::operator_events::Op;

/// The sends a key may make a minute in this test.
const PER_MINUTE: usize = 3;

/// The outbound interaction a sent message left in the history: (text, meta).
async fn logged(env: &hermes_testkit::TestEnv, run: &Value) -> Vec<(String, Value)> {
    let run: RunId = run.as_str().unwrap().parse().unwrap();
    let c = env.db().get().await.unwrap();
    c.query(
        "SELECT text, meta FROM interactions WHERE run_id = $1 AND direction = 'outbound'",
        &[&run],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_send_reaches_a_known_chat_once_and_is_logged_and_limited() {
    let peer = peer().await;
    // Telegram no longer knows chat 6666: refused for good.
    telegram_send_message(TG_TOKEN)
        .and(body_partial_json(json!({"chat_id": "6666"})))
        .respond_with(ResponseTemplate::new(400).set_body_json(
            json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"}),
        ))
        .with_priority(1)
        .mount(&peer)
        .await;
    let mut env = env_with(&peer).await;
    env.set("HERMES_OPERATOR_SENDS_PER_MINUTE", &PER_MINUTE.to_string());
    env.user(Platform::Telegram, "6161", 5).await;
    env.user(Platform::Telegram, "6666", 5).await;
    let fleet = env.start(&[Service::Ingest, Service::Delivery]).await;
    let op = Op::new(&env).await;
    let from = op.latest().await;

    let send = json!({ "target": "telegram:6161", "text": "Hello from the operators",
                       "idempotency_key": "greeting-1", "wait_ms": 30_000 });
    let sent = op.ok("messages_send", send.clone()).await;
    assert_eq!(sent["status"], "sent", "{sent}");
    let again = op.ok("messages_send", send).await;
    assert_eq!(
        again["handle"], sent["handle"],
        "the same key names the same send"
    );
    assert_eq!(again["status"], "sent");
    assert_eq!(
        telegram_texts_to(&peer, "6161").await,
        ["Hello from the operators"]
    );
    let history = logged(&env, &sent["handle"]).await;
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].0, "Hello from the operators");
    assert_eq!(history[0].1["source"], "operator");
    assert_eq!(history[0].1["by"], "operator");
    let page = settled(&op, json!({ "after_cursor": from, "kinds": ["message"] })).await;
    let out: Vec<&Value> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["run_id"] == sent["handle"])
        .collect();
    assert_eq!(out.len(), 1, "{page}");
    assert_eq!(out[0]["direction"], "outbound");
    assert_eq!(out[0]["chat_id"], "6161");
    // The handle alone reads the outcome.
    let status = op
        .ok("messages_send", json!({ "handle": sent["handle"] }))
        .await;
    assert_eq!(status["status"], "sent");

    let unknown = op
        .refused(
            "messages_send",
            json!({ "target": "telegram:424242", "text": "hi" }),
        )
        .await;
    assert_eq!(unknown["code"], "UNKNOWN_CHAT");
    let bad = op
        .refused(
            "messages_send",
            json!({ "target": "telegram:6161", "text": "x", "image_url": "http://x.test/a.png" }),
        )
        .await;
    assert_eq!(bad["code"], "INVALID_ARGUMENT");

    let gone = op
        .ok(
            "messages_send",
            json!({ "target": "telegram:6666", "text": "still there?", "wait_ms": 30_000 }),
        )
        .await;
    assert_eq!(gone["status"], "failed", "{gone}");
    let failed = settled(
        &op,
        json!({ "after_cursor": from, "kinds": ["delivery_failed"] }),
    )
    .await;
    let failed = &failed["events"][0];
    assert_eq!(failed["run_id"], gone["handle"], "{failed}");
    assert_eq!(failed["chat_id"], "6666");
    assert!(logged(&env, &gone["handle"]).await.is_empty());

    // Two sends so far counted (the retry did not); the rest of the minute's go at once,
    // then the key is refused with the time to wait.
    let mut refused = None;
    for i in 0..=PER_MINUTE {
        let r = op
            .call(
                "messages_send",
                json!({ "target": "telegram:6161", "text": format!("burst {i}"), "wait_ms": 0 }),
            )
            .await;
        if let Err(e) = r {
            refused = Some((i, e));
            break;
        }
    }
    let (at, refusal) = refused.expect("refused within the minute's sends");
    assert!(at < PER_MINUTE, "refused after {at} more sends");
    assert_eq!(refusal["code"], "RATE_LIMITED");
    assert!(refusal["retry_after_secs"].as_u64().unwrap() >= 1);
    fleet.stop().await.unwrap();
}

/// An `events_poll` page with nothing held back: a page may hold committed events back
/// behind a transaction still running (`held_back`), and the tool says to poll again.
async fn settled(op: &Op, args: Value) -> Value {
    eventually(
        Duration::from_secs(30),
        "a page nothing held back",
        || async {
            let page = op.ok("events_poll", args.clone()).await;
            (page["held_back"] == false).then_some(page)
        },
    )
    .await
}
