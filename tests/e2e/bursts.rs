//! Bursts (docs/channels.md, bursts): three short WhatsApp messages within the quiet window
//! get one answer to all three (one run, one charge), and a router killed inside the window
//! loses none of them and answers once after it is back.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{App, TestEnv, eventually};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::statuses::{APP_SECRET, text_message, wa_body};

const PHONE_ID: &str = "106540352242922";
const USER: &str = "16315551181";

/// The Cloud API on `api`, a user on WhatsApp, the webhook route open and bursts on with a
/// quiet window of `quiet_ms`.
async fn burst_env(api: &MockServer, quiet_ms: u64) -> TestEnv {
    Mock::given(method("POST"))
        .and(path(format!("/{PHONE_ID}/messages")))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"messaging_product": "whatsapp", "messages": [{"id": "wamid.OUT"}]}),
        ))
        .mount(api)
        .await;
    let mut env = TestEnv::new().await;
    env.set("WHATSAPP_APP_SECRET", "wa-app-secret-0123")
        .set("WHATSAPP_VERIFY_TOKEN", "wa-verify-token")
        .set("WHATSAPP_ACCESS_TOKEN", "wa-access-token")
        .set("WHATSAPP_PHONE_NUMBER_ID", PHONE_ID)
        .set("WHATSAPP_API_BASE_URL", &api.uri())
        .set("HERMES_BURST_QUIET_MS", &quiet_ms.to_string())
        .set("HERMES_BURST_MAX_WAIT_MS", "600000");
    env.user(Platform::Whatsapp, USER, 10).await;
    env
}

/// The texts sent to the Cloud API, in order.
async fn sent(api: &MockServer) -> Vec<String> {
    api.received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| !crate::statuses::is_read_receipt(r))
        .map(|r| {
            let v: Value = serde_json::from_slice(&r.body).unwrap();
            v["text"]["body"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

/// The first text sent to the Cloud API, once there is one.
async fn the_answer(api: &MockServer) -> String {
    eventually(Duration::from_secs(30), "the answer", || async {
        sent(api).await.into_iter().next()
    })
    .await
}

/// Post three messages, one webhook each.
async fn three_messages(app: &App) {
    for (i, text) in ["one", "two", "three"].into_iter().enumerate() {
        let m = text_message(&format!("wamid.IN-{i}"), text);
        app.whatsapp_message(APP_SECRET, &wa_body(json!([m]), json!([])))
            .await;
    }
}

/// One run, answered, charged once, nothing held: no other answer can come.
async fn answered_once(env: &TestEnv) {
    let c = env.db().get().await.unwrap();
    let one = |sql: &'static str| {
        let c = &c;
        async move { c.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    let runs = eventually(
        Duration::from_secs(30),
        "the burst's run closed",
        || async {
            let n = one("SELECT count(*) FROM agent_runs WHERE status = 'completed'").await;
            (n >= 1).then_some(n)
        },
    )
    .await;
    assert_eq!(runs, 1);
    assert_eq!(one("SELECT count(*) FROM agent_runs").await, 1);
    assert_eq!(
        one("SELECT count(*) FROM credit_ledger WHERE reason = 'charge'").await,
        1
    );
    assert_eq!(
        one("SELECT count(*) FROM burst_messages WHERE released_at IS NULL").await,
        0
    );
    assert_eq!(one("SELECT count(*) FROM burst_messages").await, 3);
    let key: String = c
        .query_one("SELECT external_message_id FROM agent_runs", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(
        key, "wamid.IN-0",
        "the run is keyed by the burst's first message"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_messages_within_the_quiet_window_get_one_answer_to_all_three() {
    let api = MockServer::start().await;
    let env = burst_env(&api, 1500).await;
    let fleet = env.start(&Service::ALL).await;
    three_messages(&fleet).await;
    // A duplicate of a held message joins nothing.
    fleet
        .whatsapp_message(
            APP_SECRET,
            &wa_body(json!([text_message("wamid.IN-1", "two")]), json!([])),
        )
        .await;
    assert_eq!(the_answer(&api).await, "echo: one\ntwo\nthree");
    answered_once(&env).await;
    assert_eq!(sent(&api).await.len(), 1);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_killed_inside_the_window_loses_nothing_and_answers_once() {
    let api = MockServer::start().await;
    // A window the kill is sure to fall inside.
    let mut env = burst_env(&api, 600_000).await;
    let first = env.start_killable(&Service::ALL).await;
    three_messages(&first).await;
    let db = env.db();
    eventually(Duration::from_secs(30), "three messages held", || async {
        let c = db.get().await.ok()?;
        let held = hermes_db::bursts::held(&c).await.ok()?;
        (held == 3).then_some(())
    })
    .await;
    first.kill();
    assert!(
        sent(&api).await.is_empty(),
        "nothing answered inside the window"
    );

    // Back with a short window: the held messages are one turn, answered once.
    env.set("HERMES_BURST_QUIET_MS", "50");
    let fleet = env.start(&Service::ALL).await;
    assert_eq!(the_answer(&api).await, "echo: one\ntwo\nthree");
    answered_once(&env).await;
    assert_eq!(sent(&api).await.len(), 1);
    fleet.stop().await.unwrap();
}
