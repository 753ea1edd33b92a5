//! Facebook Messenger end to end (docs/channels.md, "Facebook Messenger"): a Page's message
//! signed by the app answered through the fleet as a `RESPONSE`, with `mark_seen` and
//! `typing_on` while it is worked on; a bad signature refused with nothing queued; a
//! redelivery answered once; outside the 24-hour window a reply goes under the configured tag,
//! or is parked; a 429 waited and retried, and a permanent error parked with its reason; a
//! photo reaches the vision model.

use std::time::Duration;

use hermes::Service;
use hermes_bus::{Bus, Stage};
use hermes_testkit::{
    MESSENGER_TOKEN, TestEnv, drain, eventually, messenger_answers, messenger_fake, messenger_send,
    messenger_sent, messenger_text, meta_signature, openai_fake,
};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::ResponseTemplate;
use wiremock::matchers::body_partial_json;

use crate::delivery::{parked_for, parked_one, reply, waits_out_a_429};

const APP_SECRET: &str = "messenger-app-secret-0123";
const PSID: &str = "1254459154682919";

fn messenger_env(env: &mut TestEnv, api: &wiremock::MockServer) {
    env.set("MESSENGER_APP_SECRET", APP_SECRET)
        .set("MESSENGER_VERIFY_TOKEN", "messenger-verify")
        .set("MESSENGER_PAGE_ACCESS_TOKEN", MESSENGER_TOKEN)
        .set("MESSENGER_API_BASE_URL", &api.uri())
        .set("HERMES_SEND_PAUSES_MS", "10,10,10")
        .set("HERMES_DELIVERY_RETRY_DELAYS", "60");
}

async fn post(fleet: &hermes_testkit::App, body: &Value, secret: &str) -> u16 {
    let raw = serde_json::to_vec(body).unwrap();
    let headers = [("x-hub-signature-256", meta_signature(secret, &raw))];
    fleet
        .post_webhook("/webhooks/messenger", &headers, raw)
        .await
        .status()
        .as_u16()
}

/// The messages (not sender actions) the fake Page sent.
async fn messages(api: &wiremock::MockServer) -> Vec<Value> {
    messenger_sent(api)
        .await
        .into_iter()
        .filter(|b| b.get("message").is_some())
        .collect()
}

async fn queued(bus: &Bus) -> usize {
    drain(bus, Stage::Router).await.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_message_is_answered_as_a_response_once_with_sender_actions() {
    let api = messenger_fake().await;
    let model = openai_fake("Hello from Hermes").await;
    let mut env = TestEnv::new().await;
    messenger_env(&mut env, &api);
    env.openai_mock(&model.uri());
    env.user(Platform::Messenger, PSID, 10).await;
    let fleet = env.start(&Service::ALL).await;

    let body = messenger_text(PSID, "m_in_1", "hi");
    assert_eq!(post(&fleet, &body, "wrong-secret").await, 401);
    assert_eq!(post(&fleet, &body, APP_SECRET).await, 200);
    // Meta redelivers the same message: answered once.
    assert_eq!(post(&fleet, &body, APP_SECRET).await, 200);
    let sent = eventually(Duration::from_secs(30), "the answer", || async {
        messages(&api).await.into_iter().next()
    })
    .await;
    assert_eq!(sent["recipient"]["id"], PSID);
    assert_eq!(sent["messaging_type"], "RESPONSE");
    assert_eq!(sent["message"]["text"], "Hello from Hermes");
    let actions: Vec<String> = messenger_sent(&api)
        .await
        .iter()
        .filter_map(|b| b["sender_action"].as_str().map(str::to_string))
        .collect();
    assert_eq!(actions.first().map(String::as_str), Some("mark_seen"));
    assert!(actions.iter().any(|a| a == "typing_on"), "{actions:?}");
    // The redelivery made no second run and no second answer.
    let db = env.db();
    let c = db.get().await.unwrap();
    let runs: i64 = c
        .query_one(
            "SELECT count(*) FROM agent_runs WHERE platform = 'messenger'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(runs, 1);
    assert_eq!(messages(&api).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_signature_queues_nothing() {
    let api = messenger_fake().await;
    let mut env = TestEnv::new().await;
    messenger_env(&mut env, &api);
    let fleet = env.start(&[Service::Ingest]).await;
    let bus = env.bus().await;
    let body = messenger_text(PSID, "m_in_2", "hi");
    assert_eq!(post(&fleet, &body, "wrong-secret").await, 401);
    assert_eq!(queued(&bus).await, 0);
    assert_eq!(post(&fleet, &body, APP_SECRET).await, 200);
    assert_eq!(queued(&bus).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_window_replies_are_parked_or_tagged_and_errors_retried_or_parked() {
    let api = wiremock::MockServer::start().await;
    // A 429 once for "slow", a permanent refusal for "gone", then everything accepted.
    messenger_send()
        .and(body_partial_json(json!({"recipient": {"id": "slow"}})))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(json!({"error": {"code": 613, "message": "rate limited"}})),
        )
        .up_to_n_times(1)
        .mount(&api)
        .await;
    messenger_send()
        .and(body_partial_json(json!({"recipient": {"id": "gone"}})))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "error": {"message": "(#100) No matching user found", "type": "OAuthException", "code": 100}
        })))
        .mount(&api)
        .await;
    messenger_send()
        .respond_with(messenger_answers())
        .mount(&api)
        .await;
    let mut env = TestEnv::new().await;
    messenger_env(&mut env, &api);
    let _fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;

    // Nobody wrote: without a tag, parked unsent.
    let closed = reply(Platform::Messenger, "nobody", None, "late");
    bus.publish(&closed).await.unwrap();
    let parked = parked_one(&bus, Stage::Delivery, Duration::from_secs(20)).await;
    assert_eq!(parked.env.id, closed.id);
    assert_eq!(parked.reason.as_deref(), Some("outside_window"));

    // Inside the window: a 429 is waited and retried; a refused recipient is parked.
    let c = env.db().get().await.unwrap();
    for chat in ["slow", "gone"] {
        hermes_db::messenger_windows::record(&c, chat, chrono::Utc::now())
            .await
            .unwrap();
    }
    waits_out_a_429(&bus, Platform::Messenger, "slow", || async {
        let sent = messages(&api).await;
        sent.iter()
            .filter(|b| b["recipient"]["id"] == "slow")
            .count()
    })
    .await;
    parked_for(&bus, Platform::Messenger, "gone", "invalid_recipient").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_window_a_configured_tag_goes_with_the_reply() {
    let api = messenger_fake().await;
    let mut env = TestEnv::new().await;
    messenger_env(&mut env, &api);
    let config = std::env::temp_dir().join(format!("{}-messenger.toml", env.ns));
    std::fs::write(
        &config,
        "[channels.messenger]\noutside_window_tag = \"ACCOUNT_UPDATE\"\n",
    )
    .unwrap();
    env.set("HERMES_CONFIG", config.to_str().unwrap());
    let _fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    bus.publish(&reply(
        Platform::Messenger,
        "quiet",
        None,
        "your order shipped",
    ))
    .await
    .unwrap();
    let sent = eventually(Duration::from_secs(20), "the tagged message", || async {
        messages(&api).await.into_iter().next()
    })
    .await;
    assert_eq!(sent["messaging_type"], "MESSAGE_TAG");
    assert_eq!(sent["tag"], "ACCOUNT_UPDATE");
    assert_eq!(sent["message"]["text"], "your order shipped");
}

/// A photo sent to the Page reaches the vision model inline, fetched from the attachment's
/// URL (Meta's CDN, pre-signed) through the SSRF guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_sent_to_the_page_reaches_the_vision_model() {
    use wiremock::matchers::{method, path};

    let api = messenger_fake().await;
    let photo = crate::sms::jpeg();
    let cdn = wiremock::MockServer::start().await;
    wiremock::Mock::given(method("GET"))
        .and(path("/v/photo.jpg"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "image/jpeg")
                .set_body_bytes(photo.clone()),
        )
        .mount(&cdn)
        .await;
    let model = openai_fake("A sunset").await;
    let mut env = TestEnv::new().await;
    messenger_env(&mut env, &api);
    env.openai_mock(&model.uri())
        .set("HERMES_MEDIA_FETCH_ALLOW", "127.0.0.1");
    env.user(Platform::Messenger, PSID, 10).await;
    let fleet = env.start(&Service::ALL).await;

    let mut body = messenger_text(PSID, "m_photo_1", "what is this?");
    body["entry"][0]["messaging"][0]["message"]["attachments"] = json!([
        {"type": "image", "payload": {"url": format!("{}/v/photo.jpg", cdn.uri())}}
    ]);
    assert_eq!(post(&fleet, &body, APP_SECRET).await, 200);
    let sent = eventually(Duration::from_secs(30), "the answer", || async {
        messages(&api).await.into_iter().next()
    })
    .await;
    assert_eq!(sent["message"]["text"], "A sunset");
    assert!(
        crate::images::model_saw_jpeg(&model, &photo).await,
        "the photo reached the model"
    );
}
