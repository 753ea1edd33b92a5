//! Statuses tied to sends (docs/channels.md, statuses): the wamid of each WhatsApp send kept
//! with its run, the statuses Meta reports moving it forward only and shown by the run API,
//! a redelivered status webhook changing nothing twice, and a `failed` status after a 200
//! sending the part again, then parking the reply with its reason and failing the run; a
//! Telegram send's message id kept the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hermes::Service;
use hermes_bus::Stage;
use hermes_testkit::{Fleet, TestEnv, eventually, metric, telegram_send_message};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::api_edges::get_json;
use crate::delivery::parked_one;

pub(crate) const APP_SECRET: &str = "wa-app-secret-0123";
const PHONE_ID: &str = "106540352242922";
const USER: &str = "16315551181";

/// Meta's answer to a send: a new wamid each time (`wamid.OUT-1`, `wamid.OUT-2`, …). A read
/// receipt (the presence call at the run's start, same endpoint) is answered as Meta does,
/// with no wamid.
struct Wamids(Arc<AtomicUsize>);

impl Respond for Wamids {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        if is_read_receipt(request) {
            return ResponseTemplate::new(200).set_body_json(json!({"success": true}));
        }
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        ResponseTemplate::new(200).set_body_json(json!({
            "messaging_product": "whatsapp",
            "contacts": [{"input": USER, "wa_id": USER}],
            "messages": [{"id": format!("wamid.OUT-{n}")}]
        }))
    }
}

/// The Cloud API on `api`, a user on WhatsApp, and the webhook route open.
async fn wa_env(api: &MockServer) -> TestEnv {
    Mock::given(method("POST"))
        .and(path(format!("/{PHONE_ID}/messages")))
        .respond_with(Wamids(Arc::default()))
        .mount(api)
        .await;
    let mut env = TestEnv::new().await;
    env.set("WHATSAPP_APP_SECRET", APP_SECRET)
        .set("WHATSAPP_VERIFY_TOKEN", "wa-verify-token")
        .set("WHATSAPP_ACCESS_TOKEN", "wa-access-token")
        .set("WHATSAPP_PHONE_NUMBER_ID", PHONE_ID)
        .set("WHATSAPP_API_BASE_URL", &api.uri())
        .set("HERMES_SEND_PAUSES_MS", "10,10,10")
        // One send again at most, then parked.
        .set("HERMES_DELIVERY_RETRY_DELAYS", "60");
    env.user(Platform::Whatsapp, USER, 10).await;
    env
}

/// A Cloud API webhook body carrying `messages` and `statuses`.
pub(crate) fn wa_body(messages: Value, statuses: Value) -> Value {
    json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881", "phone_number_id": PHONE_ID},
            "contacts": [{"profile": {"name": "Ada"}, "wa_id": USER}],
            "messages": messages,
            "statuses": statuses
        }}]}]
    })
}

/// A text message from the user, written now: inside WhatsApp's 24-hour window, so the
/// answer goes as free text (docs/channels.md, "WhatsApp's window and templates").
pub(crate) fn text_message(id: &str, text: &str) -> Value {
    let now = chrono::Utc::now().timestamp().to_string();
    json!({"from": USER, "id": id, "timestamp": now, "type": "text", "text": {"body": text}})
}

fn status(wamid: &str, status: &str, at: u64) -> Value {
    json!({"id": wamid, "status": status, "timestamp": at.to_string(), "recipient_id": USER})
}

/// Meta's published `failed` status (tests/fixtures), naming `wamid`: error 131000.
fn failed(wamid: &str) -> Value {
    let mut body: Value = serde_json::from_str(include_str!(
        "../../shared/channels/tests/fixtures/whatsapp/status_failed.json"
    ))
    .unwrap();
    body["entry"][0]["changes"][0]["value"]["statuses"][0]["id"] = json!(wamid);
    body
}

/// Whether `request` to the messages endpoint is a read receipt (with the typing indicator),
/// not a message.
pub(crate) fn is_read_receipt(request: &Request) -> bool {
    serde_json::from_slice::<Value>(&request.body).is_ok_and(|v| v["status"] == "read")
}

/// The texts sent to the Cloud API, in order.
async fn sent_texts(api: &MockServer) -> Vec<String> {
    api.received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == format!("/{PHONE_ID}/messages") && !is_read_receipt(r))
        .map(|r| {
            let v: Value = serde_json::from_slice(&r.body).unwrap();
            v["text"]["body"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

/// The run's row id once the send `wamid` is recorded against it.
async fn run_of_send(env: &TestEnv, wamid: &str) -> uuid::Uuid {
    let db = env.db();
    eventually(
        Duration::from_secs(30),
        "the send's wamid recorded",
        || async {
            let c = db.get().await.ok()?;
            c.query_opt(
                "SELECT run_id FROM platform_sends WHERE platform_message_id = $1",
                &[&wamid],
            )
            .await
            .ok()
            .flatten()
            .map(|r| r.get(0))
        },
    )
    .await
}

async fn run_view(fleet: &Fleet, run: uuid::Uuid) -> Value {
    get_json(fleet, &format!("/v1/runs/{run}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sends_wamid_is_kept_and_the_phones_statuses_show_on_the_run_once() {
    let api = MockServer::start().await;
    let env = wa_env(&api).await;
    let fleet = env.start(&Service::ALL).await;
    fleet
        .whatsapp_message(
            APP_SECRET,
            &wa_body(json!([text_message("wamid.IN-1", "hello")]), json!([])),
        )
        .await;
    let run = run_of_send(&env, "wamid.OUT-1").await;
    assert_eq!(sent_texts(&api).await, ["echo: hello"]);

    // Sent, delivered, read; then the same body again and a late `delivered`.
    let statuses = wa_body(
        json!([]),
        json!([
            status("wamid.OUT-1", "sent", 1_760_000_001),
            status("wamid.OUT-1", "delivered", 1_760_000_002),
            status("wamid.OUT-1", "read", 1_760_000_003)
        ]),
    );
    fleet.whatsapp_message(APP_SECRET, &statuses).await;
    fleet.whatsapp_message(APP_SECRET, &statuses).await;
    fleet
        .whatsapp_message(
            APP_SECRET,
            &wa_body(
                json!([]),
                json!([status("wamid.OUT-1", "delivered", 1_760_000_004)]),
            ),
        )
        .await;

    let view = run_view(&fleet, run).await;
    assert_eq!(view["status"], "completed");
    let sends = view["sends"].as_array().unwrap();
    assert_eq!(sends.len(), 1, "{view}");
    assert_eq!(sends[0]["platform_message_id"], "wamid.OUT-1");
    assert_eq!(sends[0]["platform"], "whatsapp");
    assert_eq!(sends[0]["status"], "read", "never backwards");
    assert_eq!(sends[0]["error_code"], Value::Null);

    // The operator's view: `hermes runs show` reads the same from PostgreSQL.
    let id = run.to_string();
    let (code, out, err) = env.hermes(&["runs", "show", &id, "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(shown["status"], "completed", "{shown}");
    assert_eq!(shown["sends"][0]["platform_message_id"], "wamid.OUT-1");
    assert_eq!(shown["sends"][0]["status"], "read");
    // Its one model call, with the call's own usage.
    let calls = shown["model_calls"].as_array().expect("model_calls");
    assert_eq!(calls.len(), 1, "{shown}");
    assert_eq!(calls[0]["round"], 0);
    assert!(
        calls[0]["usage"]["input_tokens"].as_u64() > Some(0),
        "{shown}"
    );
    let (code, lines, err) = env.hermes(&["runs", "show", &id]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        lines.contains("part 0 whatsapp wamid.OUT-1  read") && lines.contains("model call 0 "),
        "{lines}"
    );
    let (code, _, err) = env.hermes(&["runs", "show", "not-a-run"]).await;
    assert_ne!(code, 0);
    assert!(err.contains("is not a run id"), "{err}");

    // Each status counted once, however often it was reported.
    let metrics = fleet.metrics().await;
    for (s, n) in [
        ("accepted", 1.0),
        ("sent", 1.0),
        ("delivered", 1.0),
        ("read", 1.0),
    ] {
        let series =
            format!("hermes_delivery_statuses_total{{platform=\"whatsapp\",status=\"{s}\"}}");
        assert_eq!(metric(&metrics, &series), Some(n), "{series}");
    }
    assert_eq!(sent_texts(&api).await.len(), 1, "statuses send nothing");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_status_after_a_200_is_sent_again_then_parked_with_its_reason() {
    let api = MockServer::start().await;
    let env = wa_env(&api).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    fleet
        .whatsapp_message(
            APP_SECRET,
            &wa_body(json!([text_message("wamid.IN-1", "ping")]), json!([])),
        )
        .await;
    let run = run_of_send(&env, "wamid.OUT-1").await;

    // Meta accepted the send, then reports it failed (131000, worth another try), twice.
    fleet
        .whatsapp_message(APP_SECRET, &failed("wamid.OUT-1"))
        .await;
    fleet
        .whatsapp_message(APP_SECRET, &failed("wamid.OUT-1"))
        .await;
    assert_eq!(
        run_of_send(&env, "wamid.OUT-2").await,
        run,
        "the part sent again"
    );
    assert_eq!(sent_texts(&api).await, ["echo: ping", "echo: ping"]);

    // It fails again: its one send again is used up, so the reply is parked with the reason.
    fleet
        .whatsapp_message(APP_SECRET, &failed("wamid.OUT-2"))
        .await;
    let parked = parked_one(&bus, Stage::Delivery, Duration::from_secs(30)).await;
    assert_eq!(parked.reason.as_deref(), Some("service_unavailable"));
    assert!(parked.detail.unwrap_or_default().contains("131000"));
    assert_eq!(parked.env.run_id.as_uuid(), run);

    // The run gets the usual failure handling: failed, refunded once.
    let view = eventually(Duration::from_secs(30), "the run failed", || async {
        let v = run_view(&fleet, run).await;
        (v["status"] == "failed").then_some(v)
    })
    .await;
    let sends = view["sends"].as_array().unwrap();
    let shown: Vec<(&str, &str, i64)> = sends
        .iter()
        .map(|s| {
            (
                s["platform_message_id"].as_str().unwrap(),
                s["status"].as_str().unwrap(),
                s["error_code"].as_i64().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("wamid.OUT-1", "failed", 131000),
            ("wamid.OUT-2", "failed", 131000)
        ]
    );
    let c = env.db().get().await.unwrap();
    let refunds: i64 = c
        .query_one(
            "SELECT count(*) FROM credit_ledger WHERE run_id = $1 AND reason = 'refund'",
            &[&run],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(refunds, 1);
    // The failure reported twice made one send again; nothing more went out.
    let replies: i64 = c
        .query_one(
            "SELECT count(*) FROM platform_send_replies WHERE run_id = $1",
            &[&run],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(replies, 3, "the reply, its send again, its parking");
    assert_eq!(sent_texts(&api).await.len(), 2);
    let metrics = fleet.metrics().await;
    let late = |o: &str| {
        metric(
            &metrics,
            &format!(
                "hermes_delivery_late_failures_total{{outcome=\"{o}\",platform=\"whatsapp\"}}"
            ),
        )
    };
    assert_eq!((late("resent"), late("parked")), (Some(1.0), Some(1.0)));
    bus.close().await;
    fleet.stop().await.unwrap();
}

/// Telegram reports no statuses, but the id of each message sent (`result.message_id`) is
/// kept with the run all the same, and shown by the run API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_sends_message_id_is_kept_with_its_run() {
    let api = MockServer::start().await;
    telegram_send_message(crate::delivery::TG_TOKEN)
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"ok": true, "result": {"message_id": 77, "chat": {"id": 4242}, "date": 1_760_000_000}}),
        ))
        .mount(&api)
        .await;
    let mut env = crate::delivery::sender_env(&api).await;
    env.set("TELEGRAM_WEBHOOK_SECRET", "tg-secret-0123456789");
    env.user(Platform::Telegram, "4242", 10).await;
    let fleet = env.start(&Service::ALL).await;
    fleet
        .telegram_update(
            crate::delivery::TG_SECRET,
            &hermes_testkit::telegram_text(4242, 7, "ping"),
        )
        .await;
    let run = run_of_send(&env, "77").await;
    let view = eventually(Duration::from_secs(30), "the run completed", || async {
        let v = run_view(&fleet, run).await;
        (v["status"] == "completed").then_some(v)
    })
    .await;
    assert_eq!(view["sends"][0]["platform"], "telegram");
    assert_eq!(view["sends"][0]["platform_message_id"], "77");
    assert_eq!(view["sends"][0]["status"], "accepted");
    fleet.stop().await.unwrap();
}
