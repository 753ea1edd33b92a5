//! Presence (docs/channels.md, "Presence"): when a run starts on a WhatsApp message, one call
//! marks it read with the typing indicator; on Telegram the typing action is renewed while a
//! slow model answers and stops with the answer; a failing presence endpoint fails nothing.

use std::sync::Arc;
use std::time::Duration;

use hermes::Service;
use hermes_testkit::{
    TestEnv, eventually, metric, openai_answer, telegram_text, telegram_texts_to,
};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::delivery::bodies;

const APP_SECRET: &str = "wa-app-secret-presence";
const TG_TOKEN: &str = "777:presence-token";
const TG_SECRET: &str = "tg-secret-presence-01";

/// A WhatsApp webhook body carrying one text message `wamid` from `phone`, sent now.
fn whatsapp_message(phone: &str, wamid: &str, text: &str) -> Value {
    json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA_ID", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550001111", "phone_number_id": "555000"},
            "contacts": [{"profile": {"name": "Kai"}, "wa_id": phone}],
            "messages": [{"from": phone, "id": wamid,
                          "timestamp": chrono::Utc::now().timestamp().to_string(),
                          "type": "text", "text": {"body": text}}]
        }}]}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whatsapp_message_is_marked_read_with_typing_once_and_a_failing_receipt_fails_nothing() {
    const PHONE: &str = "15550003333";
    const WAMID: &str = "wamid.HBgLMTU1NTAwMDMzMzMVAgASGBQzQUY";
    let api = MockServer::start().await;
    // The receipt endpoint is failing; sends work.
    Mock::given(method("POST"))
        .and(path("/555000/messages"))
        .and(body_partial_json(json!({"status": "read"})))
        .respond_with(ResponseTemplate::new(500))
        .with_priority(1)
        .mount(&api)
        .await;
    Mock::given(method("POST"))
        .and(path("/555000/messages"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"messages": [{"id": "wamid.out"}]})),
        )
        .with_priority(2)
        .mount(&api)
        .await;
    let mut env = TestEnv::new().await;
    env.set("WHATSAPP_APP_SECRET", APP_SECRET)
        .set("WHATSAPP_VERIFY_TOKEN", "wa-verify")
        .set("WHATSAPP_ACCESS_TOKEN", "wa-token")
        .set("WHATSAPP_PHONE_NUMBER_ID", "555000")
        .set("WHATSAPP_API_BASE_URL", &api.uri());
    env.user(Platform::Whatsapp, PHONE, 10).await;
    let fleet = env.start(&Service::ALL).await;
    fleet
        .whatsapp_message(APP_SECRET, &whatsapp_message(PHONE, WAMID, "hola"))
        .await;

    // The answer goes, as free text: the message opened the window.
    let reply = eventually(Duration::from_secs(30), "the reply", || async {
        bodies(&api, "/555000/messages")
            .await
            .into_iter()
            .find(|b| b["type"] == "text")
    })
    .await;
    assert_eq!(reply["to"], PHONE);
    assert_eq!(reply["text"]["body"], "echo: hola");
    let status: String = eventually(Duration::from_secs(20), "the run closed", || async {
        let c = env.db().get().await.ok()?;
        let s: String = c
            .query_one(
                "SELECT status FROM agent_runs WHERE chat_id = $1",
                &[&PHONE],
            )
            .await
            .ok()?
            .get(0);
        (s != "routed" && s != "running").then_some(s)
    })
    .await;
    assert_eq!(status, "completed");
    // One receipt with typing, for the inbound message, failed and counted.
    eventually(Duration::from_secs(20), "the failure counted", || async {
        let m = fleet.metrics().await;
        (metric(
            &m,
            "hermes_chat_presence_total{outcome=\"failed\",platform=\"whatsapp\"}",
        ) == Some(1.0))
        .then_some(())
    })
    .await;
    let receipts: Vec<Value> = bodies(&api, "/555000/messages")
        .await
        .into_iter()
        .filter(|b| b["status"] == "read")
        .collect();
    assert_eq!(
        receipts,
        [
            json!({"messaging_product": "whatsapp", "status": "read", "message_id": WAMID,
                "typing_indicator": {"type": "text"}})
        ]
    );
    let window = hermes_db::whatsapp_windows::read(&env.db().get().await.unwrap(), PHONE)
        .await
        .unwrap()
        .expect("the message opened the window");
    assert_eq!(window.user_name.as_deref(), Some("Kai"));
    fleet.stop().await.unwrap();
}

/// An OpenAI-compatible model that answers each chat message only when the test releases
/// it (one permit per answer); memory extractions get no facts at once. Its base URL ends
/// in `/v1`.
async fn held_model(release: Arc<Semaphore>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |body: String| {
            let release = release.clone();
            async move {
                if body.contains("You extract durable facts") {
                    return axum::Json(openai_answer(r#"{"facts":[]}"#, 1, 1));
                }
                release.acquire().await.unwrap().forget();
                axum::Json(openai_answer("typed answer", 1, 1))
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

/// The `typing` actions Telegram received for `chat`.
async fn typing(api: &MockServer, chat: &str) -> usize {
    bodies(api, &format!("/bot{TG_TOKEN}/sendChatAction"))
        .await
        .into_iter()
        .filter(|b| *b == json!({"chat_id": chat, "action": "typing"}))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_shows_typing_while_a_slow_model_answers_and_stops_with_the_answer() {
    let api = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "result": {"message_id": 1}})),
        )
        .mount(&api)
        .await;
    let release = Arc::new(Semaphore::new(0));
    let model = held_model(release.clone()).await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&model)
        .set("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .set("TELEGRAM_API_BASE_URL", &api.uri())
        .set("TELEGRAM_WEBHOOK_SECRET", TG_SECRET);
    env.user(Platform::Telegram, "4242", 10).await;
    env.user(Platform::Telegram, "4343", 10).await;
    let fleet = env.start(&Service::ALL).await;
    // The model holds its answer: the typing action is shown and renewed meanwhile.
    fleet
        .telegram_update(TG_SECRET, &telegram_text(4242, 1, "first question"))
        .await;
    eventually(
        Duration::from_secs(30),
        "typing renewed in 4242",
        || async { (typing(&api, "4242").await >= 2).then_some(()) },
    )
    .await;
    assert!(
        telegram_texts_to(&api, "4242").await.is_empty(),
        "no answer yet"
    );
    release.add_permits(1);
    eventually(Duration::from_secs(30), "the answer in 4242", || async {
        (telegram_texts_to(&api, "4242").await == ["typed answer"]).then_some(())
    })
    .await;
    let typed = typing(&api, "4242").await;

    // Another chat's answer held for two renewals (over one renewal period after the first
    // answer): chat 4242 got no typing action since its answer.
    fleet
        .telegram_update(TG_SECRET, &telegram_text(4343, 2, "second question"))
        .await;
    eventually(
        Duration::from_secs(30),
        "typing renewed in 4343",
        || async { (typing(&api, "4343").await >= 2).then_some(()) },
    )
    .await;
    release.add_permits(1);
    eventually(Duration::from_secs(30), "the answer in 4343", || async {
        (telegram_texts_to(&api, "4343").await == ["typed answer"]).then_some(())
    })
    .await;
    assert_eq!(typing(&api, "4242").await, typed, "stopped with the answer");
    let m = fleet.metrics().await;
    assert!(
        metric(
            &m,
            "hermes_chat_presence_total{outcome=\"sent\",platform=\"telegram\"}"
        )
        .is_some_and(|n| n >= 4.0),
        "{m}"
    );
    fleet.stop().await.unwrap();
}
