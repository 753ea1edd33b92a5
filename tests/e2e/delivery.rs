//! Delivery: queued retries through the wait queues, parking with a failure reason,
//! channel senders against wiremock platform APIs, the shared breaker and the rate gate.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes::Service;
use hermes_bus::{Bus, Stage};
use hermes_runtime::stage::{FAILURE_DETAIL_HEADER, FAILURE_REASON_HEADER};
use hermes_testkit::{
    TestEnv, answered, eventually, metric, telegram_ok, telegram_send_message, telegram_sent,
    telegram_text,
};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{Platform, ReplyTo};
use lapin::options::{BasicAckOptions, BasicGetOptions};
use lapin::types::AMQPValue;
use serde_json::{Value, json};
use wiremock::matchers::{body_json, body_partial_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A reply envelope answering `text` to `chat_id` on `platform`.
pub(crate) fn reply(
    platform: Platform,
    chat_id: &str,
    callback_url: Option<String>,
    text: &str,
) -> Envelope {
    let to = ReplyTo {
        platform,
        chat_id: chat_id.into(),
        callback_url,
        quote: None,
        interaction: None,
    };
    let reply = answered(to, text);
    Envelope::new(RunId::new(), None, &reply)
}

/// Make `env`'s REST callbacks sendable to the local peer: the loopback address allowed, and
/// a key with a signing secret that `runs` belong to (a callback is signed with the secret
/// of the key that sent its run, or not sent).
async fn callbacks_to(env: &mut TestEnv) -> hermes_types::ids::ApiKeyId {
    env.set(
        "HERMES_SECRET_KEYS",
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
    )
    .set("HERMES_CALLBACK_ALLOW", "127.0.0.1");
    let ring = hermes_net::keyring::KeyRing::new(&env.config().router.secret_keys);
    let client = env.db().get().await.unwrap();
    hermes_db::api_keys::create(&client, "peer", Some("http://127.0.0.1/"), ring.as_ref())
        .await
        .unwrap()
        .key
        .id
}

/// The run row of `envelope` (a reply the test publishes), as sent with `key`.
async fn keyed_run(env: &TestEnv, key: hermes_types::ids::ApiKeyId, envelope: &Envelope) {
    env.db()
        .get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO agent_runs (id, platform, sender_id, status, tier, api_key_id)
             VALUES ($1, 'rest', 'u1', 'routed', 'free', $2)",
            &[&envelope.run_id.as_uuid(), &key],
        )
        .await
        .unwrap();
}

/// A message taken from a parking queue, with its failure headers.
pub(crate) struct Parked {
    pub(crate) env: Envelope,
    pub(crate) reason: Option<String>,
    pub(crate) detail: Option<String>,
}

fn amqp_header(h: &lapin::types::FieldTable, name: &str) -> Option<String> {
    match h.inner().get(name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        _ => None,
    }
}

/// Take every message of `stage`'s parking queue (acking them).
async fn take_parked(bus: &Bus, stage: Stage) -> Vec<Parked> {
    let ch = bus.channel().await.expect("channel");
    let mut out = Vec::new();
    while let Some(m) = ch
        .basic_get(
            bus.names().parking(stage).into(),
            BasicGetOptions::default(),
        )
        .await
        .expect("basic.get")
    {
        let headers = m.delivery.properties.headers().clone().unwrap_or_default();
        out.push(Parked {
            env: Envelope::from_slice(&m.delivery.data).expect("envelope"),
            reason: amqp_header(&headers, FAILURE_REASON_HEADER),
            detail: amqp_header(&headers, FAILURE_DETAIL_HEADER),
        });
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .expect("ack");
    }
    out
}

/// Wait until `stage`'s parking queue holds a message and take it.
pub(crate) async fn parked_one(bus: &Bus, stage: Stage, within: Duration) -> Parked {
    eventually(within, "a parked message", || async {
        take_parked(bus, stage).await.into_iter().next()
    })
    .await
}

/// Publishes a reply to `chat` on `platform` whose first send the fake API answers with a
/// 429 and `Retry-After: 1`, and waits until `tries` counts the second attempt, a second
/// or more later.
pub(crate) async fn waits_out_a_429<F, Fut>(bus: &Bus, platform: Platform, chat: &str, tries: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = usize>,
{
    let started = Instant::now();
    bus.publish(&reply(platform, chat, None, "patience"))
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "the second try", || async {
        (tries().await == 2).then_some(())
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After was waited"
    );
}

/// Publishes a reply to `chat` on `platform` that the fake API refuses for good, and
/// returns it as parked, first try, with `reason`.
pub(crate) async fn parked_for(bus: &Bus, platform: Platform, chat: &str, reason: &str) -> Parked {
    let refused = reply(platform, chat, None, "anyone?");
    bus.publish(&refused).await.unwrap();
    let parked = parked_one(bus, Stage::Delivery, Duration::from_secs(20)).await;
    assert_eq!((parked.env.id, parked.env.attempt), (refused.id, 0));
    assert_eq!(parked.reason.as_deref(), Some(reason));
    parked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_callback_waits_through_the_schedule_then_is_parked_with_its_reason() {
    let peer = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/down"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&peer)
        .await;
    Mock::given(method("POST"))
        .and(path("/refuses"))
        .respond_with(ResponseTemplate::new(400))
        .mount(&peer)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_DELIVERY_RETRY_DELAYS", "1,2")
        .set("HERMES_SEND_PAUSES_MS", "10,10,10");
    let key = callbacks_to(&mut env).await;
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;

    // A peer that keeps failing: first attempt, then after 1 s and 2 s, then parked; each
    // attempt is four in-call tries.
    let down = reply(
        Platform::Rest,
        "u1",
        Some(format!("{}/down", peer.uri())),
        "hi",
    );
    keyed_run(&env, key, &down).await;
    bus.publish(&down).await.unwrap();
    let parked = parked_one(&bus, Stage::Delivery, Duration::from_secs(30)).await;
    assert_eq!(parked.env.id, down.id, "the same message, same id");
    assert_eq!(parked.env.attempt, 2, "both queued retries were used");
    assert_eq!(parked.reason.as_deref(), Some("service_unavailable"));
    assert!(parked.detail.unwrap().contains("503"));
    let tries = peer.received_requests().await.unwrap().len();
    assert_eq!(tries, 3 * 4, "three attempts of four tries");

    // A permanent refusal is parked at once, never retried.
    let refused = reply(
        Platform::Rest,
        "u1",
        Some(format!("{}/refuses", peer.uri())),
        "hi",
    );
    keyed_run(&env, key, &refused).await;
    bus.publish(&refused).await.unwrap();
    let parked = parked_one(&bus, Stage::Delivery, Duration::from_secs(10)).await;
    assert_eq!(parked.env.id, refused.id);
    assert_eq!(parked.env.attempt, 0);
    assert_eq!(parked.reason.as_deref(), Some("invalid_recipient"));
    assert_eq!(peer.received_requests().await.unwrap().len(), 3 * 4 + 1);

    let metrics = fleet.metrics().await;
    assert!(
        metrics.contains("hermes_delivery_retries_total{delay=\"1s\",stage=\"delivery\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hermes_delivery_retries_total{delay=\"2s\",stage=\"delivery\"} 1"),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
}

pub(crate) const TG_TOKEN: &str = "123456:test-bot-token";
pub(crate) const TG_SECRET: &str = "tg-secret-0123456789";

/// A fleet environment whose chat senders all point at `api`.
pub(crate) async fn sender_env(api: &MockServer) -> TestEnv {
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .set("TELEGRAM_API_BASE_URL", &api.uri())
        .set("D360_API_KEY", "d360-key")
        .set("D360_BASE_URL", &format!("{}/d360", api.uri()))
        .set("INSTAGRAM_ACCESS_TOKEN", "ig-token")
        .set("INSTAGRAM_API_BASE_URL", &format!("{}/graph", api.uri()))
        // Fast in-call retries; queued retries far away unless a test shortens them.
        .set("HERMES_SEND_PAUSES_MS", "10,10,10")
        .set("HERMES_DELIVERY_RETRY_DELAYS", "60");
    env
}

/// The JSON bodies `api` received on `p`, in order.
pub(crate) async fn bodies(api: &MockServer, p: &str) -> Vec<Value> {
    api.received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == p)
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_platform_gets_the_request_its_api_expects_photos_included_and_long_texts_are_split() {
    let api = MockServer::start().await;
    telegram_send_message(TG_TOKEN)
        .and(body_json(
            json!({"chat_id": "4242", "text": "hello *there*", "parse_mode": "Markdown"}),
        ))
        .respond_with(telegram_ok())
        .expect(1)
        .named("telegram sendMessage")
        .mount(&api)
        .await;
    Mock::given(method("POST"))
        .and(path("/d360/messages"))
        .and(header("D360-API-KEY", "d360-key"))
        .and(body_json(json!({
            "messaging_product": "whatsapp", "recipient_type": "individual", "to": "16315551181",
            "type": "text", "text": {"body": "hola", "preview_url": false}
        })))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"messages": [{"id": "wamid.1"}]})),
        )
        .expect(1)
        .named("360dialog messages")
        .mount(&api)
        .await;
    Mock::given(method("POST"))
        .and(path("/graph/me/messages"))
        .and(query_param("access_token", "ig-token"))
        .and(body_json(
            json!({"recipient": {"id": "1789"}, "message": {"text": "ciao"}}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"message_id": "m1"})))
        .expect(1)
        .named("instagram messages")
        .mount(&api)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/bot{TG_TOKEN}/sendPhoto")))
        .and(body_json(json!({
            "chat_id": "4242", "photo": "https://img.example/bar.jpg",
            "caption": "The bar.", "parse_mode": "Markdown"
        })))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .expect(1)
        .named("telegram sendPhoto")
        .mount(&api)
        .await;
    Mock::given(method("POST"))
        .and(path("/d360/messages"))
        .and(body_json(json!({
            "messaging_product": "whatsapp", "recipient_type": "individual", "to": "16315551181",
            "type": "image", "image": {"link": "https://img.example/bar.jpg", "caption": "The bar."}
        })))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"messages": [{"id": "wamid.3"}]})),
        )
        .expect(1)
        .named("360dialog image")
        .mount(&api)
        .await;
    telegram_send_message(TG_TOKEN)
        .and(body_partial_json(json!({"chat_id": "long"})))
        .respond_with(telegram_ok())
        .expect(3)
        .named("telegram long text")
        .mount(&api)
        .await;
    let env = sender_env(&api).await;
    // The WhatsApp user wrote a moment ago: free text may go (docs/channels.md).
    crate::whatsapp_window::wrote(&env, "16315551181", chrono::TimeDelta::zero(), None).await;
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    bus.publish(&reply(Platform::Telegram, "4242", None, "hello *there*"))
        .await
        .unwrap();
    bus.publish(&reply(Platform::Whatsapp, "16315551181", None, "hola"))
        .await
        .unwrap();
    bus.publish(&reply(Platform::Instagram, "1789", None, "ciao"))
        .await
        .unwrap();
    // A Markdown image is sent as a photo with the rest as its caption.
    let photo = "![Sunset bar](https://img.example/bar.jpg) The bar.";
    bus.publish(&reply(Platform::Telegram, "4242", None, photo))
        .await
        .unwrap();
    bus.publish(&reply(Platform::Whatsapp, "16315551181", None, photo))
        .await
        .unwrap();
    // 9,000 characters in three paragraphs of 3,000: three messages, one per paragraph.
    let paragraphs: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|w| format!("{w}{}.", " word".repeat(599)))
        .collect();
    let long = paragraphs.join("\n\n");
    bus.publish(&reply(Platform::Telegram, "long", None, &long))
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "every send", || async {
        (api.received_requests().await.unwrap().len() >= 8).then_some(())
    })
    .await;
    let parts: Vec<String> = telegram_sent(&api)
        .await
        .into_iter()
        .filter(|b| b["chat_id"] == "long")
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(parts, paragraphs, "split on paragraphs, in order");
    api.verify().await;
    let metrics = fleet.metrics().await;
    for p in ["telegram", "whatsapp", "instagram"] {
        assert!(
            metrics.contains(&format!(
                "hermes_deliveries_total{{outcome=\"sent\",platform=\"{p}\"}}"
            )),
            "{metrics}"
        );
        assert!(
            metrics.contains(&format!(
                "hermes_delivery_breaker_open{{platform=\"{p}\"}} 0"
            )),
            "{metrics}"
        );
    }
    fleet.stop().await.unwrap();

    // The WhatsApp Cloud API instead of 360dialog, by configuration.
    let cloud = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v21.0/555000/messages"))
        .and(header("authorization", "Bearer wa-cloud-token"))
        .and(body_partial_json(
            json!({"messaging_product": "whatsapp", "to": "16315551181", "text": {"body": "hola"}}),
        ))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"messages": [{"id": "wamid.2"}]})),
        )
        .expect(1)
        .mount(&cloud)
        .await;
    let mut env = TestEnv::new().await;
    env.set("WHATSAPP_ACCESS_TOKEN", "wa-cloud-token")
        .set("WHATSAPP_PHONE_NUMBER_ID", "555000")
        .set("WHATSAPP_API_BASE_URL", &format!("{}/v21.0", cloud.uri()));
    crate::whatsapp_window::wrote(&env, "16315551181", chrono::TimeDelta::zero(), None).await;
    let fleet = env.start(&[Service::Delivery]).await;
    env.bus()
        .await
        .publish(&reply(Platform::Whatsapp, "16315551181", None, "hola"))
        .await
        .unwrap();
    eventually(Duration::from_secs(20), "the Cloud API send", || async {
        (!cloud.received_requests().await.unwrap().is_empty()).then_some(())
    })
    .await;
    cloud.verify().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_429_is_waited_400_is_parked_and_bad_formatting_goes_plain() {
    let api = MockServer::start().await;
    // 429 with Retry-After once for chat "slow", then accepted.
    telegram_send_message(TG_TOKEN)
        .and(body_partial_json(json!({"chat_id": "slow"})))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(
                    json!({"ok": false, "error_code": 429, "parameters": {"retry_after": 1}}),
                ),
        )
        .up_to_n_times(1)
        .mount(&api)
        .await;
    // A chat that does not exist.
    telegram_send_message(TG_TOKEN)
        .and(body_partial_json(json!({"chat_id": "gone"})))
        .respond_with(ResponseTemplate::new(400).set_body_json(
            json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"}),
        ))
        .mount(&api)
        .await;
    // Markdown Telegram cannot parse, accepted as plain text.
    telegram_send_message(TG_TOKEN)
        .and(body_partial_json(json!({"chat_id": "fmt", "parse_mode": "Markdown"})))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "ok": false, "error_code": 400,
            "description": "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 3"
        })))
        .mount(&api)
        .await;
    telegram_send_message(TG_TOKEN)
        .respond_with(telegram_ok())
        .mount(&api)
        .await;
    let env = sender_env(&api).await;
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;

    waits_out_a_429(&bus, Platform::Telegram, "slow", || async {
        let sent = telegram_sent(&api).await;
        sent.iter().filter(|b| b["chat_id"] == "slow").count()
    })
    .await;

    let parked = parked_for(&bus, Platform::Telegram, "gone", "invalid_recipient").await;
    assert!(
        !parked.detail.unwrap_or_default().contains(TG_TOKEN),
        "the bot token never reaches a header"
    );
    let tries = telegram_sent(&api)
        .await
        .iter()
        .filter(|b| b["chat_id"] == "gone")
        .count();
    assert_eq!(tries, 1, "a permanent refusal is not retried");

    bus.publish(&reply(Platform::Telegram, "fmt", None, "a *b"))
        .await
        .unwrap();
    let plain = eventually(Duration::from_secs(20), "the plain-text resend", || async {
        telegram_sent(&api)
            .await
            .into_iter()
            .find(|b| b["chat_id"] == "fmt" && b.get("parse_mode").is_none())
    })
    .await;
    assert_eq!(plain, json!({"chat_id": "fmt", "text": "a *b"}));

    let metrics = fleet.metrics().await;
    for line in [
        "hermes_delivery_attempts_total{platform=\"telegram\",reason=\"rate_limited\"} 1",
        "hermes_delivery_attempts_total{platform=\"telegram\",reason=\"invalid_recipient\"} 2",
        "hermes_deliveries_total{outcome=\"invalid_recipient\",platform=\"telegram\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
    fleet.stop().await.unwrap();
}

/// The value of `series` in a Prometheus exposition, 0 while it has no sample yet.
fn metric0(text: &str, series: &str) -> f64 {
    metric(text, series).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_failures_open_the_breaker_for_every_instance_and_a_success_closes_it() {
    let api = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&api)
        .await;
    let mut env = sender_env(&api).await;
    env.set("HERMES_BREAKER_OPEN_SECS", "3")
        .set("HERMES_SEND_PAUSES_MS", "1");
    // Two delivery instances on one namespace: the breaker lives in Redis.
    let a = env.start(&[Service::Delivery]).await;
    let b = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    for i in 0..10 {
        bus.publish(&reply(Platform::Telegram, &format!("c{i}"), None, "x"))
            .await
            .unwrap();
    }
    // Ten sends, two tries each, then the breaker is open.
    eventually(Duration::from_secs(20), "the breaker to open", || async {
        let open = metric0(
            &a.metrics().await,
            "hermes_delivery_breaker_open{platform=\"telegram\"}",
        ) + metric0(
            &b.metrics().await,
            "hermes_delivery_breaker_open{platform=\"telegram\"}",
        );
        (open >= 1.0).then_some(())
    })
    .await;
    let tried = api.received_requests().await.unwrap().len();
    assert_eq!(tried, 20);

    // While open, neither instance sends.
    for i in 0..4 {
        bus.publish(&reply(Platform::Telegram, &format!("d{i}"), None, "x"))
            .await
            .unwrap();
    }
    let skipped = "hermes_delivery_attempts_total{platform=\"telegram\",reason=\"breaker_open\"}";
    eventually(Duration::from_secs(10), "four skipped sends", || async {
        let n = metric0(&a.metrics().await, skipped) + metric0(&b.metrics().await, skipped);
        (n >= 4.0).then_some(())
    })
    .await;
    assert_eq!(api.received_requests().await.unwrap().len(), tried);
    let wa = metric0(
        &a.metrics().await,
        "hermes_delivery_breaker_open{platform=\"whatsapp\"}",
    );
    assert_eq!(wa, 0.0, "other platforms are not affected");

    // After the open period one send goes through; its success closes the breaker.
    api.reset().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": true})))
        .mount(&api)
        .await;
    let open_key = format!("{}:breaker:telegram:open", env.ns);
    let redis = redis::Client::open(env.vars["REDIS_URL"].as_str()).unwrap();
    let mut c = redis.get_multiplexed_async_connection().await.unwrap();
    eventually(Duration::from_secs(10), "the open period to end", || {
        let mut c = c.clone();
        let open_key = open_key.clone();
        async move {
            let open: bool = redis::cmd("EXISTS")
                .arg(&open_key)
                .query_async(&mut c)
                .await
                .ok()?;
            (!open).then_some(())
        }
    })
    .await;
    bus.publish(&reply(Platform::Telegram, "e0", None, "x"))
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "the breaker to close", || async {
        let sent = "hermes_deliveries_total{outcome=\"sent\",platform=\"telegram\"}";
        let n = metric0(&a.metrics().await, sent) + metric0(&b.metrics().await, sent);
        (n >= 1.0).then_some(())
    })
    .await;
    let open: Option<String> = redis::cmd("GET")
        .arg(&open_key)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(open, None);
    a.stop().await.unwrap();
    b.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_to_one_chat_is_spread_by_the_rate_gate() {
    let api = MockServer::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    Mock::given(method("POST"))
        .respond_with(move |_: &wiremock::Request| {
            record.lock().unwrap().push(Instant::now());
            ResponseTemplate::new(200).set_body_json(json!({"ok": true}))
        })
        .mount(&api)
        .await;
    let mut env = sender_env(&api).await;
    env.set("HERMES_DELIVERY_CHAT_PER_SEC", "2");
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    for i in 0..4 {
        bus.publish(&reply(Platform::Telegram, "busy", None, &format!("m{i}")))
            .await
            .unwrap();
    }
    eventually(Duration::from_secs(20), "four sends", || async {
        (seen.lock().unwrap().len() == 4).then_some(())
    })
    .await;
    let times = seen.lock().unwrap().clone();
    // Two a second with no burst: four messages span at least 1.5 s.
    let span = *times.iter().max().unwrap() - *times.iter().min().unwrap();
    assert!(span >= Duration::from_millis(1400), "{span:?}");
    let metrics = fleet.metrics().await;
    assert!(metrics.contains("hermes_delivery_rate_wait_seconds_count{platform=\"telegram\"} 4"));
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_webhook_is_answered_in_the_chat() {
    let api = MockServer::start().await;
    telegram_send_message(TG_TOKEN)
        .respond_with(telegram_ok())
        .mount(&api)
        .await;
    let mut env = sender_env(&api).await;
    env.set("TELEGRAM_WEBHOOK_SECRET", TG_SECRET);
    env.user(Platform::Telegram, "4242", 10).await;
    let fleet = env.start(&Service::ALL).await;
    fleet
        .telegram_update(TG_SECRET, &telegram_text(4242, 7, "ping from telegram"))
        .await;
    let sent = eventually(Duration::from_secs(30), "the reply in the chat", || async {
        telegram_sent(&api).await.into_iter().next()
    })
    .await;
    assert_eq!(sent["chat_id"], "4242");
    assert_eq!(sent["text"], "echo: ping from telegram");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_growing_parking_queue_alerts_ops_once() {
    let peer = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/refuses"))
        .respond_with(ResponseTemplate::new(404))
        .mount(&peer)
        .await;
    Mock::given(method("POST"))
        .and(path("/slack"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&peer)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_ALERT_PARKING_ABOVE", "1")
        .set("HERMES_ALERT_SLACK_URL", &format!("{}/slack", peer.uri()));
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    for _ in 0..2 {
        let msg = reply(
            Platform::Rest,
            "u1",
            Some(format!("{}/refuses", peer.uri())),
            "hi",
        );
        bus.publish(&msg).await.unwrap();
    }
    let alert: Value = eventually(Duration::from_secs(20), "the Slack alert", || async {
        peer.received_requests()
            .await
            .unwrap()
            .iter()
            .find(|r| r.url.path() == "/slack")
            .map(|r| serde_json::from_slice(&r.body).unwrap())
    })
    .await;
    let text = alert["text"].as_str().unwrap();
    let queue = format!("{}.delivery.dead", env.ns);
    assert!(
        text.contains("parking_queue_growth") && text.contains(&queue),
        "{text}"
    );
    // Checked every 5 s, posted once per dedupe window: wait for the next check to raise
    // it again (counted even when deduplicated).
    let raised = "hermes_alerts_total{kind=\"parking_queue_growth\"}";
    eventually(
        Duration::from_secs(20),
        "the alert raised again",
        || async { (metric0(&fleet.metrics().await, raised) >= 2.0).then_some(()) },
    )
    .await;
    let posts = peer
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/slack")
        .count();
    assert_eq!(posts, 1);
    let metrics = fleet.metrics().await;
    assert!(
        metrics.contains(&format!("hermes_queue_messages{{queue=\"{queue}\"}} 2")),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_half_sent_reply_sends_only_the_rest() {
    let paragraphs: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|w| format!("{w}{}.", " word".repeat(599)))
        .collect();
    let api = MockServer::start().await;
    // The second part fails through all four in-call tries, then is accepted.
    telegram_send_message(TG_TOKEN)
        .and(body_partial_json(json!({"text": paragraphs[1]})))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(4)
        .mount(&api)
        .await;
    telegram_send_message(TG_TOKEN)
        .respond_with(telegram_ok())
        .mount(&api)
        .await;
    let mut env = sender_env(&api).await;
    env.set("HERMES_DELIVERY_RETRY_DELAYS", "1")
        .set("HERMES_DELIVERY_CHAT_BURST", "5");
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    bus.publish(&reply(
        Platform::Telegram,
        "half",
        None,
        &paragraphs.join("\n\n"),
    ))
    .await
    .unwrap();
    let count = |texts: &[Value], p: &str| texts.iter().filter(|b| b["text"] == p).count();
    let texts = eventually(Duration::from_secs(20), "the last part", || async {
        let texts = telegram_sent(&api).await;
        (count(&texts, &paragraphs[2]) > 0).then_some(texts)
    })
    .await;
    assert_eq!(
        count(&texts, &paragraphs[0]),
        1,
        "the first part is not sent again"
    );
    assert_eq!(
        count(&texts, &paragraphs[1]),
        5,
        "four failed tries, then the retry"
    );
    assert_eq!(count(&texts, &paragraphs[2]), 1);
    let metrics = fleet.metrics().await;
    assert!(
        metrics.contains("hermes_delivery_retries_total{delay=\"1s\",stage=\"delivery\"} 1"),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_parking_queue_refuses_and_the_message_stays() {
    use futures_util::future::join_all;
    use hermes_bus::{Outgoing, PARKING_MAX_LENGTH};
    let peer = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400))
        .mount(&peer)
        .await;
    let env = TestEnv::new().await;
    let bus = env.bus().await;
    // Fill the delivery parking queue to its cap.
    let names = bus.names().clone();
    let parking = names.parking(Stage::Delivery);
    let dead = names.dead_exchange();
    let filler = Outgoing::from_envelope(&reply(Platform::Rest, "x", None, "filler"));
    for chunk in 0..(PARKING_MAX_LENGTH / 500) {
        let publishes = (0..500).map(|_| bus.publish_to(&dead, "delivery", &parking, &filler));
        for r in join_all(publishes).await {
            r.unwrap_or_else(|e| panic!("filling chunk {chunk}: {e}"));
        }
    }
    // A quorum queue checks its length after the fact, so it may take a few more before it
    // refuses: publish until it does.
    let mut extra = 0;
    while bus
        .publish_to(&dead, "delivery", &parking, &filler)
        .await
        .is_ok()
    {
        extra += 1;
        assert!(extra < 1000, "the parking queue never refused");
    }
    let fleet = env.start(&[Service::Delivery]).await;
    let refused = reply(
        Platform::Rest,
        "u1",
        Some(format!("{}/refuses", peer.uri())),
        "hi",
    );
    bus.publish(&refused).await.unwrap();
    let rejected = format!("hermes_parking_rejected_total{{queue=\"{parking}\"}}");
    eventually(Duration::from_secs(20), "the refused parking", || async {
        (metric0(&fleet.metrics().await, &rejected) >= 1.0).then_some(())
    })
    .await;
    let metrics = fleet.metrics().await;
    assert!(
        metric0(&metrics, "hermes_alerts_total{kind=\"parking_queue_full\"}") >= 1.0,
        "{metrics}"
    );
    // Nothing was dropped: the parking queue still holds its 5,000 and the refused message
    // is still in the delivery queue (being retried, or waiting to be dead-lettered).
    let (parked, _) = bus.queue_stats(&parking).await.unwrap();
    assert_eq!(i64::from(parked), PARKING_MAX_LENGTH + extra);
    fleet.stop().await.unwrap();
    let (waiting, _) = bus
        .queue_stats(&names.queue(Stage::Delivery))
        .await
        .unwrap();
    assert_eq!(waiting, 1, "the refused message stays in its work queue");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turning_the_killswitch_on_alerts_discord() {
    let hook = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/discord"))
        .respond_with(ResponseTemplate::new(204))
        .mount(&hook)
        .await;
    let mut env = TestEnv::new().await;
    env.set(
        "HERMES_ALERT_DISCORD_URL",
        &format!("{}/discord", hook.uri()),
    );
    let out = env
        .command()
        .args(["killswitch", "on", "--reason", "drill"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let posts = bodies(&hook, "/discord").await;
    assert_eq!(posts.len(), 1, "posted before the command returned");
    let content = posts[0]["content"].as_str().unwrap();
    assert!(
        content.starts_with("[hermes] killswitch_on:") && content.contains("drill"),
        "{content}"
    );
}
