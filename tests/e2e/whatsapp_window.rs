//! WhatsApp's 24-hour customer-service window (docs/channels.md, "WhatsApp's window and
//! templates"): inside it a reply goes as free text; outside it as the configured approved
//! template (checked in the body Meta's fake received), also a scheduled job's run and an
//! operator's `messages_send`; with no template it is parked as `outside_window`, never
//! attempted, and its run ends failed. A user's message opens the window.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use hermes::Service;
use hermes_bus::Stage;
use hermes_testkit::{KEY, TestEnv, eventually, metric};
use hermes_types::envelope::Envelope;
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::delivery::{bodies, sender_env};
use crate::jobs::{call, create_job};
use crate::operator_events::Op;

/// The TOML file of a fleet whose WhatsApp sends outside the window go as `follow_up`.
pub(crate) const TEMPLATES: &str = r#"
[channels.whatsapp]
outside_window_template = "follow_up"

[channels.whatsapp.templates.follow_up]
name = "hermes_follow_up"
language = "en_US"
parameters = ["{user_name}", "{reply}"]
"#;

/// Write `toml` as this test's configuration file and point `env` at it.
pub(crate) fn with_config(env: &mut TestEnv, toml: &str) {
    let file = std::env::temp_dir().join(format!("{}-whatsapp.toml", env.ns));
    std::fs::write(&file, toml).unwrap();
    env.set("HERMES_CONFIG", file.to_str().unwrap());
}

/// Record that the user of `chat` last wrote `ago`, under `name`.
pub(crate) async fn wrote(env: &TestEnv, chat: &str, ago: TimeDelta, name: Option<&str>) {
    let c = env.db().get().await.unwrap();
    hermes_db::whatsapp_windows::record(&c, chat, Utc::now() - ago, name)
        .await
        .unwrap();
}

/// A reply answering `text` to the WhatsApp user `chat`.
fn reply(chat: &str, text: &str) -> Envelope {
    crate::delivery::reply(Platform::Whatsapp, chat, None, text)
}

/// A template message as Meta's API takes it.
fn template_body(to: &str, name: &str, reply: &str) -> Value {
    json!({
        "messaging_product": "whatsapp", "recipient_type": "individual", "to": to,
        "type": "template",
        "template": {
            "name": "hermes_follow_up", "language": {"code": "en_US"},
            "components": [{"type": "body", "parameters": [
                {"type": "text", "text": name}, {"type": "text", "text": reply}
            ]}]
        }
    })
}

/// A WhatsApp API fake accepting every message.
async fn whatsapp_api() -> MockServer {
    let api = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"messages": [{"id": "wamid.out"}]})),
        )
        .mount(&api)
        .await;
    api
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_window_a_reply_goes_as_the_template_and_inside_it_as_free_text() {
    let api = whatsapp_api().await;
    let mut env = sender_env(&api).await;
    with_config(&mut env, TEMPLATES);
    wrote(&env, "1001", TimeDelta::hours(2), Some("Ada")).await;
    wrote(&env, "1002", TimeDelta::hours(25), Some("Bo")).await;
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    for (chat, text) in [
        ("1001", "Your table is booked."),
        ("1002", "Your table is booked.\n\nSee you at 8."),
        // Never wrote: no window at all, and no name.
        ("1003", "Reminder: dinner at 8."),
    ] {
        bus.publish(&reply(chat, text)).await.unwrap();
    }
    let sent = eventually(Duration::from_secs(20), "three sends", || async {
        let sent = bodies(&api, "/d360/messages").await;
        (sent.len() >= 3).then_some(sent)
    })
    .await;
    let to = |chat: &str| sent.iter().find(|b| b["to"] == chat).cloned().unwrap();
    assert_eq!(
        to("1001"),
        json!({
            "messaging_product": "whatsapp", "recipient_type": "individual", "to": "1001",
            "type": "text", "text": {"body": "Your table is booked.", "preview_url": false}
        })
    );
    // The reply on one line (Meta refuses line breaks in a parameter), the name recorded.
    assert_eq!(
        to("1002"),
        template_body("1002", "Bo", "Your table is booked. See you at 8.")
    );
    assert_eq!(
        to("1003"),
        template_body("1003", "there", "Reminder: dinner at 8.")
    );
    let m = fleet.metrics().await;
    assert_eq!(
        metric(
            &m,
            "hermes_deliveries_total{outcome=\"template\",platform=\"whatsapp\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        metric(
            &m,
            "hermes_deliveries_total{outcome=\"sent\",platform=\"whatsapp\"}"
        ),
        Some(1.0)
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_template_a_send_outside_the_window_is_parked_and_its_run_fails() {
    let api = whatsapp_api().await;
    let env = sender_env(&api).await;
    wrote(&env, "2001", TimeDelta::hours(30), None).await;
    let late = reply("2001", "A late answer");
    let run = late.run_id;
    env.db()
        .get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier)
             VALUES ($1, 'whatsapp', '2001', '2001', 'routed', 'free')",
            &[&run.as_uuid()],
        )
        .await
        .unwrap();
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    bus.publish(&late).await.unwrap();
    let status: String = eventually(Duration::from_secs(20), "the run closed", || async {
        let c = env.db().get().await.ok()?;
        let row = c
            .query_one(
                "SELECT status FROM agent_runs WHERE id = $1",
                &[&run.as_uuid()],
            )
            .await
            .ok()?;
        let status: String = row.get(0);
        (status != "routed").then_some(status)
    })
    .await;
    assert_eq!(status, "failed");
    // Never attempted as free text.
    assert!(bodies(&api, "/d360/messages").await.is_empty());
    let (code, out, err) = env.hermes(&["dlq", "list", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let rows: Value = serde_json::from_str(&out).unwrap();
    let parked = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == json!(run))
        .unwrap_or_else(|| panic!("the reply is parked: {rows}"));
    assert_eq!(parked["reason"], "outside_window", "{parked}");
    assert_eq!(
        bus.queue_stats(&bus.names().parking(Stage::Delivery))
            .await
            .unwrap()
            .0,
        1
    );
    let m = fleet.metrics().await;
    assert_eq!(
        metric(
            &m,
            "hermes_deliveries_total{outcome=\"outside_window\",platform=\"whatsapp\"}"
        ),
        Some(1.0)
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_and_an_operator_send_to_a_closed_window_go_as_the_template() {
    const PHONE: &str = "15550002222";
    let api = whatsapp_api().await;
    let mut env = TestEnv::new().await;
    env.set("WHATSAPP_ACCESS_TOKEN", "wa-token")
        .set("WHATSAPP_PHONE_NUMBER_ID", "555000")
        .set("WHATSAPP_API_BASE_URL", &api.uri())
        .set("HERMES_SEND_PAUSES_MS", "10,10,10");
    with_config(&mut env, TEMPLATES);
    env.user(Platform::Whatsapp, PHONE, 10).await;
    wrote(&env, PHONE, TimeDelta::hours(48), Some("Kai")).await;
    let fleet = env.start(&Service::ALL).await;
    let messages = "/555000/messages";

    // A scheduled job's run is not the user writing: the window stays closed.
    let id = create_job(
        &fleet,
        KEY,
        json!({"name": "nudge", "prompt": "good morning", "schedule": {"cron": "0 9 * * *"},
               "target": {"type": "chat", "platform": "whatsapp", "chat_id": PHONE}}),
    )
    .await;
    let (status, _) = call(&fleet, "POST", &format!("/api/jobs/{id}/run"), KEY, None).await;
    assert_eq!(status, 202);
    let job_send = eventually(Duration::from_secs(30), "the job's send", || async {
        bodies(&api, messages).await.into_iter().next()
    })
    .await;
    assert_eq!(job_send["type"], "template", "{job_send}");
    assert_eq!(job_send["template"]["name"], "hermes_follow_up");
    let params = &job_send["template"]["components"][0]["parameters"];
    assert_eq!(params[0]["text"], "Kai");
    assert!(
        params[1]["text"].as_str().unwrap().contains("good morning"),
        "{job_send}"
    );

    let op = Op::new(&env).await;
    let sent = op
        .ok(
            "messages_send",
            json!({"target": format!("whatsapp:{PHONE}"), "text": "Your order shipped",
                   "idempotency_key": "ship-1", "wait_ms": 30_000}),
        )
        .await;
    assert_eq!(sent["status"], "sent", "{sent}");
    let all = bodies(&api, messages).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(
        all[1],
        template_body(PHONE, "Kai", "Your order shipped"),
        "the operator's message as the template"
    );
    fleet.stop().await.unwrap();
}
