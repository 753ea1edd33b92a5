//! Channel webhooks end to end through ingest: verification before parsing, one router
//! message per platform message, dedupe, statuses, handshakes, limits and refusals.

use std::time::Duration;

use hermes::Service;
use hermes_bus::{Bus, Stage};
use hermes_testkit::{TestEnv, drain, meta_signature};
use hermes_types::model::{Inbound, MediaKind, Platform, Reply};
use serde_json::{Value, json};

const TG_SECRET: &str = "tg-secret-0123456789";
const WA_APP_SECRET: &str = "wa-app-secret-0123";
const WA_VERIFY: &str = "wa-verify-token";
const IG_APP_SECRET: &str = "ig-app-secret-0123";
const D360_TOKEN: &str = "d360-token-0123456789";

async fn channel_env() -> TestEnv {
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_WEBHOOK_SECRET", TG_SECRET)
        .set("WHATSAPP_APP_SECRET", WA_APP_SECRET)
        .set("WHATSAPP_VERIFY_TOKEN", WA_VERIFY)
        .set("INSTAGRAM_APP_SECRET", IG_APP_SECRET)
        .set("INSTAGRAM_VERIFY_TOKEN", "ig-verify-token")
        .set("D360_WEBHOOK_TOKEN", D360_TOKEN)
        .set("HERMES_MAX_BODY_BYTES", "65536");
    env
}

async fn routed(bus: &Bus) -> Vec<Inbound> {
    // Publishes are confirmed before ingest answers, so the queue already holds them.
    drain(bus, Stage::Router)
        .await
        .iter()
        .map(|e| e.payload::<Inbound>().unwrap())
        .collect()
}

fn telegram_update(update_id: i64, message_id: i64, text: &str) -> Value {
    json!({
        "update_id": update_id,
        "message": {
            "message_id": message_id,
            "from": {"id": 4242, "is_bot": false, "first_name": "Ada", "last_name": "L"},
            "chat": {"id": 4242, "type": "private"},
            "date": 1_760_000_000,
            "text": text
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_messages_are_verified_normalized_and_deduped() {
    let env = channel_env().await;
    let fleet = env.start(&[Service::Ingest]).await;
    let bus = env.bus().await;
    let token = |t: &str| vec![("x-telegram-bot-api-secret-token", t.to_string())];
    let body = serde_json::to_vec(&telegram_update(1001, 77, "héllo 👋")).unwrap();

    let bad = fleet
        .post_webhook("/webhooks/telegram", &token("wrong"), body.clone())
        .await;
    assert_eq!(bad.status(), 401);
    assert_eq!(
        bad.json::<Value>().await.unwrap()["error"]["code"],
        "invalid_signature"
    );
    assert!(
        routed(&bus).await.is_empty(),
        "a bad token publishes nothing"
    );

    assert_eq!(
        fleet
            .post_webhook("/webhooks/telegram", &token(TG_SECRET), body.clone())
            .await
            .status(),
        200
    );
    // Telegram retries the same update: answered 2xx, nothing new.
    assert_eq!(
        fleet
            .post_webhook("/webhooks/telegram", &token(TG_SECRET), body)
            .await
            .status(),
        200
    );
    let got = routed(&bus).await;
    assert_eq!(got.len(), 1);
    let e = &got[0].event;
    assert_eq!(e.platform, Platform::Telegram);
    assert_eq!((e.sender_id.as_str(), e.chat_id.as_str()), ("4242", "4242"));
    assert_eq!(e.text.as_deref(), Some("héllo 👋"));
    assert!(
        e.external_message_id
            .as_deref()
            .is_some_and(|id| id.contains("77"))
    );

    let photo = json!({"update_id": 1002, "message": {"message_id": 78, "from": {"id": 4242}, "chat": {"id": 4242},
        "date": 1_760_000_001, "caption": "look",
        "photo": [{"file_id": "small", "width": 90, "height": 90, "file_size": 100},
                  {"file_id": "large", "width": 1280, "height": 960, "file_size": 90000}]}});
    assert_eq!(
        fleet
            .post_webhook(
                "/webhooks/telegram",
                &token(TG_SECRET),
                serde_json::to_vec(&photo).unwrap()
            )
            .await
            .status(),
        200
    );
    let got = routed(&bus).await;
    assert_eq!(got[0].event.media[0].kind, MediaKind::Image);
    assert_eq!(got[0].event.media[0].platform_id.as_deref(), Some("large"));
    assert_eq!(got[0].event.text.as_deref(), Some("look"));

    let malformed = fleet
        .post_webhook(
            "/webhooks/telegram",
            &token(TG_SECRET),
            b"{\"update_id\":".to_vec(),
        )
        .await;
    assert_eq!(malformed.status(), 400);
    let huge = fleet
        .post_webhook("/webhooks/telegram", &token(TG_SECRET), vec![b' '; 70_000])
        .await;
    assert_eq!(huge.status(), 413);
    assert!(routed(&bus).await.is_empty());

    let m = fleet.metrics().await;
    for line in [
        "hermes_ingest_messages_total{outcome=\"accepted\",platform=\"telegram\"} 2",
        "hermes_ingest_messages_total{outcome=\"duplicate\",platform=\"telegram\"} 1",
        "hermes_ingest_messages_total{outcome=\"bad_signature\",platform=\"telegram\"} 1",
        "hermes_ingest_messages_total{outcome=\"malformed\",platform=\"telegram\"} 1",
        "hermes_ingest_messages_total{outcome=\"too_large\",platform=\"telegram\"} 1",
    ] {
        assert!(m.contains(line), "missing {line}");
    }
    bus.close().await;
    fleet.stop().await.unwrap();
}

fn whatsapp_payload(messages: Value, statuses: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA_ID", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550001111", "phone_number_id": "PHONE_ID"},
            "contacts": [{"profile": {"name": "Kai"}, "wa_id": "15551234567"}],
            "messages": messages,
            "statuses": statuses
        }}]}]
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whatsapp_and_360dialog_route_messages_and_record_statuses() {
    let env = channel_env().await;
    let fleet = env.start(&[Service::Ingest]).await;
    let bus = env.bus().await;

    // Meta's handshake echoes the challenge only with the right token.
    let hs = |t: &str| {
        fleet.url(&format!(
            "/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token={t}&hub.challenge=1158201444"
        ))
    };
    let ok = reqwest::get(hs(WA_VERIFY)).await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap(), "1158201444");
    assert_eq!(reqwest::get(hs("nope")).await.unwrap().status(), 401);

    let two = whatsapp_payload(
        json!([
            {"from": "15551234567", "id": "wamid.A", "timestamp": "1760000000", "type": "text", "text": {"body": "first"}},
            {"from": "15551234567", "id": "wamid.B", "timestamp": "1760000001", "type": "interactive",
             "interactive": {"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes please"}}}
        ]),
        json!([]),
    );
    let signed = |body: &[u8]| vec![("x-hub-signature-256", meta_signature(WA_APP_SECRET, body))];
    assert_eq!(
        fleet
            .post_webhook(
                "/webhooks/whatsapp",
                &[("x-hub-signature-256", meta_signature("wrong", &two))],
                two.clone()
            )
            .await
            .status(),
        401
    );
    assert!(routed(&bus).await.is_empty());
    assert_eq!(
        fleet
            .post_webhook("/webhooks/whatsapp", &signed(&two), two.clone())
            .await
            .status(),
        200
    );
    let got = routed(&bus).await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].event.platform, Platform::Whatsapp);
    assert_eq!(got[0].event.text.as_deref(), Some("first"));
    assert_eq!(got[0].event.sender_name.as_deref(), Some("Kai"));
    assert_eq!(got[1].event.text.as_deref(), Some("Yes please"));

    // The same messages through 360dialog (token, not signature) are duplicates.
    let d360 = fleet
        .post_webhook(
            "/webhooks/360dialog",
            &[("x-hermes-webhook-token", D360_TOKEN.into())],
            two.clone(),
        )
        .await;
    assert_eq!(d360.status(), 200);
    assert!(routed(&bus).await.is_empty());
    let third = whatsapp_payload(
        json!([{"from": "15551234567", "id": "wamid.C", "timestamp": "1760000002", "type": "text", "text": {"body": "via path"}}]),
        json!([]),
    );
    assert_eq!(
        fleet
            .post_webhook("/webhooks/360dialog/wrong-token", &[], third.clone())
            .await
            .status(),
        401
    );
    assert_eq!(
        fleet
            .post_webhook(&format!("/webhooks/360dialog/{D360_TOKEN}"), &[], third)
            .await
            .status(),
        200
    );
    assert_eq!(
        routed(&bus).await[0].event.text.as_deref(),
        Some("via path")
    );

    // Statuses are recorded against the outbound message, not routed.
    let statuses = whatsapp_payload(
        json!([]),
        json!([
            {"id": "wamid.OUT1", "status": "delivered", "timestamp": "1760000100", "recipient_id": "15551234567"},
            {"id": "wamid.OUT1", "status": "read", "timestamp": "1760000200", "recipient_id": "15551234567"},
            {"id": "wamid.OUT2", "status": "failed", "timestamp": "1760000300", "recipient_id": "15551234567",
             "errors": [{"code": 131047, "title": "Re-engagement message"}]}
        ]),
    );
    assert_eq!(
        fleet
            .post_webhook("/webhooks/whatsapp", &signed(&statuses), statuses.clone())
            .await
            .status(),
        200
    );
    assert!(routed(&bus).await.is_empty());
    let client = env.db().get().await.unwrap();
    let rows = client
        .query(
            "SELECT platform_message_id, status FROM message_statuses ORDER BY occurred_at",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        got,
        vec![
            ("wamid.OUT1".to_string(), "delivered".to_string()),
            ("wamid.OUT1".to_string(), "read".to_string()),
            ("wamid.OUT2".to_string(), "failed".to_string())
        ]
    );
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instagram_messages_are_signed_and_echoes_ignored() {
    let env = channel_env().await;
    let fleet = env.start(&[Service::Ingest]).await;
    let bus = env.bus().await;
    let body = serde_json::to_vec(&json!({"object": "instagram", "entry": [{"id": "IGID", "time": 1_760_000_000_000i64, "messaging": [
        {"sender": {"id": "IGSID1"}, "recipient": {"id": "IGID"}, "timestamp": 1_760_000_000_000i64,
         "message": {"mid": "mid.1", "text": "hi from insta"}},
        {"sender": {"id": "IGID"}, "recipient": {"id": "IGSID1"}, "timestamp": 1_760_000_000_001i64,
         "message": {"mid": "mid.2", "text": "our own echo", "is_echo": true}}
    ]}]}))
    .unwrap();
    let sig = meta_signature(IG_APP_SECRET, &body);
    assert_eq!(
        fleet
            .post_webhook(
                "/webhooks/instagram",
                &[("x-hub-signature-256", "sha256=00".into())],
                body.clone()
            )
            .await
            .status(),
        401
    );
    assert_eq!(
        fleet
            .post_webhook("/webhooks/instagram", &[("x-hub-signature-256", sig)], body)
            .await
            .status(),
        200
    );
    let got = routed(&bus).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].event.platform, Platform::Instagram);
    assert_eq!(got[0].event.text.as_deref(), Some("hi from insta"));
    assert_eq!(got[0].event.sender_id, "IGSID1");
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfigured_channels_answer_404() {
    let env = TestEnv::new().await;
    let fleet = env.start(&[Service::Ingest]).await;
    for path in [
        "/webhooks/telegram",
        "/webhooks/whatsapp",
        "/webhooks/360dialog",
        "/webhooks/instagram",
    ] {
        let r = fleet.post_webhook(path, &[], b"{}".to_vec()).await;
        assert_eq!(r.status(), 404, "{path}");
        assert_eq!(
            r.json::<Value>().await.unwrap()["error"]["code"],
            "not_found"
        );
    }
    let hs = reqwest::get(
        fleet.url("/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=x&hub.challenge=1"),
    )
    .await
    .unwrap();
    assert_eq!(hs.status(), 404);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_over_the_rate_is_slowed_down_once_and_every_message_still_routed() {
    let mut env = channel_env().await;
    env.set("HERMES_INBOUND_BURST", "2")
        .set("HERMES_INBOUND_PER_MINUTE", "1")
        .set("HERMES_INBOUND_DELAY_SECS", "1");
    let fleet = env.start(&[Service::Ingest]).await;
    let bus = env.bus().await;
    let mut delayed = 0;
    for i in 0..5 {
        let body = serde_json::to_vec(&telegram_update(2000 + i, 100 + i, "spam")).unwrap();
        let r = fleet
            .post_webhook(
                "/webhooks/telegram",
                &[("x-telegram-bot-api-secret-token", TG_SECRET.into())],
                body,
            )
            .await;
        assert_eq!(r.status(), 200, "the platform must not retry");
        delayed += r.json::<Value>().await.unwrap()["delayed"]
            .as_u64()
            .unwrap();
    }
    assert_eq!(delayed, 3, "the burst is routed at once, the rest delayed");
    // Acknowledged means answered: the delayed three reach the router from the slow lane.
    let got = std::sync::Mutex::new(Vec::new());
    let all =
        hermes_testkit::eventually(Duration::from_secs(30), "every message routed", || async {
            let more = routed(&bus).await;
            let mut got = got.lock().unwrap();
            got.extend(more);
            (got.len() >= 5).then(|| got.clone())
        })
        .await;
    assert_eq!(all.len(), 5, "each message routed once");
    let replies: Vec<Reply> = drain(&bus, Stage::Delivery)
        .await
        .iter()
        .map(|e| e.payload().unwrap())
        .collect();
    assert_eq!(
        replies.len(),
        1,
        "one slow-down notice, not one per message"
    );
    assert_eq!(replies[0].reply_to.platform, Platform::Telegram);
    assert_eq!(replies[0].reply_to.chat_id, "4242");
    assert!(
        fleet
            .metrics()
            .await
            .contains("hermes_ingest_messages_total{outcome=\"delayed\",platform=\"telegram\"} 3")
    );
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_answers_503_and_never_2xx() {
    let mut env = channel_env().await;
    let proxy = env.broker_behind_proxy().await;
    // One token for the sender: every refused try below gives its token back, so the try
    // accepted after the outage is routed at once, not delayed as over the rate.
    env.set("HERMES_BUS_RECONNECT_SECS", "600")
        .set("HERMES_INBOUND_BURST", "1")
        .set("HERMES_INBOUND_PER_MINUTE", "1");
    let fleet = env.start(&[Service::Ingest]).await;
    proxy.set_down(true);
    let body = serde_json::to_vec(&telegram_update(3000, 300, "during the outage")).unwrap();
    let secret = [("x-telegram-bot-api-secret-token", TG_SECRET.to_string())];
    let try_update = || fleet.post_webhook("/webhooks/telegram", &secret, body.clone());
    // Until ingest notices the cut it may answer otherwise, but never 2xx.
    let r = hermes_testkit::eventually(Duration::from_secs(20), "ingest answering 503", || async {
        let r = try_update().await;
        assert!(!r.status().is_success(), "accepted during the outage");
        (r.status() == 503).then_some(r)
    })
    .await;
    assert_eq!(r.status(), 503);
    assert!(r.headers().contains_key("retry-after"));
    // The platform retries after the outage: accepted then (the failed try was not remembered).
    proxy.set_down(false);
    let r = hermes_testkit::eventually(
        Duration::from_secs(20),
        "ingest accepting again",
        || async {
            let r = try_update().await;
            (r.status() == 200).then_some(r)
        },
    )
    .await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["routed"].as_u64(), body["delayed"].as_u64()),
        (Some(1), Some(0)),
        "{body}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_of_a_large_meta_batch_is_routed_and_a_3_mb_body_accepted() {
    let mut env = channel_env().await;
    // One sender, 150 messages: the batch, not the rate limit, is under test.
    env.set("HERMES_INBOUND_BURST", "1000")
        .set("HERMES_INBOUND_PER_MINUTE", "1000");
    let fleet = env.start(&[Service::Ingest]).await;
    let bus = env.bus().await;
    let signed = |body: &[u8]| vec![("x-hub-signature-256", meta_signature(WA_APP_SECRET, body))];

    // 150 messages and 120 statuses in one body: all messages routed, statuses apart.
    let messages: Vec<Value> = (0..150)
        .map(|i| json!({"from": "15551234567", "id": format!("wamid.batch{i}"), "timestamp": "1760000000",
                        "type": "text", "text": {"body": format!("m{i}")}}))
        .collect();
    let statuses: Vec<Value> = (0..120)
        .map(|i| {
            json!({"id": format!("wamid.sent{i}"), "status": "delivered", "timestamp": "1760000000",
                        "recipient_id": "15551234567"})
        })
        .collect();
    let big = whatsapp_payload(json!(messages), json!(statuses));
    let r = fleet
        .post_webhook("/webhooks/whatsapp", &signed(&big), big.clone())
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["routed"], 150);
    assert_eq!(routed(&bus).await.len(), 150, "every message routed");

    // A body near Meta's 3 MB (this environment's general limit is 64 KB): accepted.
    let long = "x".repeat(2_500_000);
    let heavy = whatsapp_payload(
        json!([{"from": "15551234567", "id": "wamid.heavy", "timestamp": "1760000000",
                "type": "text", "text": {"body": long}}]),
        json!([]),
    );
    let r = fleet
        .post_webhook("/webhooks/whatsapp", &signed(&heavy), heavy.clone())
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(routed(&bus).await.len(), 1);
    bus.close().await;
    fleet.stop().await.unwrap();
}
