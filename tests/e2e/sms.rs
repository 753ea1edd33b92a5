//! SMS through Twilio end to end (docs/channels.md, "SMS through Twilio"): webhooks signed as
//! Twilio's official library signs them (the `twilio` PyPI package computes the signature),
//! refused unsigned with nothing queued, redeliveries answered once, `STOP` / `START` / `HELP`
//! honoured, an answer sent through the Messages API with its status callback tied to the
//! send, an MMS photo reaching the vision model through Twilio's authenticated media URL, a
//! 429 waited and retried, and permanent errors parked with their reasons.

use std::time::Duration;

use hermes::Service;
use hermes_bus::{Bus, Stage};
use hermes_testkit::{
    TWILIO_FROM, TWILIO_SID, TWILIO_TOKEN, TestEnv, drain, eventually, openai_fake, twilio_created,
    twilio_fake, twilio_messages, twilio_sent, twilio_sms,
};
use hermes_types::model::{Inbound, Platform};
use serde_json::json;
use wiremock::matchers::{basic_auth, body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::delivery::{parked_for, parked_one, reply, waits_out_a_429};

/// The public URL Twilio is configured to post to (behind a proxy: not ingest's own address).
const PUBLIC_URL: &str = "https://hermes.example/webhooks/twilio";
const ADA: &str = "+14155550100";

/// The signature Twilio's official Python library (`twilio.request_validator`) computes for
/// `params` posted to `url`; `None` when the library is not installed (outside CI only:
/// `scripts/test` installs it from `tests/twilio/requirements.txt`).
fn sdk_signature(url: &str, params: &[(String, String)]) -> Option<String> {
    let python = std::env::var("HERMES_TWILIO_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = "import json, sys\n\
                  from twilio.request_validator import RequestValidator\n\
                  params = dict(json.loads(sys.argv[3]))\n\
                  print(RequestValidator(sys.argv[1]).compute_signature(sys.argv[2], params))";
    let out = std::process::Command::new(python)
        .args(["-c", script, TWILIO_TOKEN, url])
        .arg(serde_json::to_string(params).unwrap())
        .output()
        .ok()
        .filter(|o| o.status.success());
    if out.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the twilio Python package is missing: scripts/test installs it (tests/twilio/requirements.txt)"
        );
        eprintln!("the twilio Python package is not installed: the SDK's signature is skipped");
    }
    out.map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string())
}

fn twilio_env(env: &mut TestEnv) {
    env.set("TWILIO_AUTH_TOKEN", TWILIO_TOKEN)
        .set("TWILIO_WEBHOOK_URL", PUBLIC_URL);
}

/// `env` sending SMS through the fake `api`.
fn sender_env(env: &mut TestEnv, api: &MockServer) {
    twilio_env(env);
    env.set("TWILIO_ACCOUNT_SID", TWILIO_SID)
        .set("TWILIO_FROM_NUMBER", TWILIO_FROM)
        .set("TWILIO_API_BASE_URL", &api.uri())
        .set("HERMES_SEND_PAUSES_MS", "10,10,10")
        .set("HERMES_DELIVERY_RETRY_DELAYS", "60");
}

async fn routed(bus: &Bus) -> Vec<Inbound> {
    drain(bus, Stage::Router)
        .await
        .iter()
        .map(|e| e.payload::<Inbound>().unwrap())
        .collect()
}

async fn opted_out(env: &TestEnv, number: &str) -> bool {
    let c = env.db().get().await.unwrap();
    hermes_db::opt_outs::is_opted_out(&c, Platform::Sms, number)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twilio_webhooks_are_verified_as_its_sdk_signs_them_deduped_and_keywords_honoured() {
    let mut env = TestEnv::new().await;
    twilio_env(&mut env);
    let config = std::env::temp_dir().join(format!("{}-sms.toml", env.ns));
    std::fs::write(
        &config,
        "[channels.sms]\nhelp_text = \"Hermes: reply STOP to stop\"\n",
    )
    .unwrap();
    env.set("HERMES_CONFIG", config.to_str().unwrap());
    let fleet = env.start(&[Service::Ingest]).await;
    let bus = env.bus().await;
    let sms = twilio_sms(
        "SM00000000000000000000000000000001",
        ADA,
        "héllo from SMS 👋",
    );

    // Unsigned, or signed over another URL: refused, nothing queued.
    let bad = fleet.twilio_post(&sms, "bm90IGEgc2lnbmF0dXJl").await;
    assert_eq!(bad.status(), 401);
    let elsewhere = fleet
        .twilio_webhook("https://evil.example/webhooks/twilio", &sms)
        .await;
    assert_eq!(elsewhere.status(), 401);
    assert!(
        routed(&bus).await.is_empty(),
        "a bad signature queues nothing"
    );

    // Signed by Twilio's own library: accepted, answered with TwiML.
    let signed = match sdk_signature(PUBLIC_URL, &sms) {
        Some(s) => s,
        None => {
            hermes_channels::twilio::verify::signature(TWILIO_TOKEN.as_bytes(), PUBLIC_URL, &sms)
        }
    };
    let ok = fleet.twilio_post(&sms, &signed).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["content-type"], "text/xml");
    assert!(ok.text().await.unwrap().ends_with("<Response/>"));
    // Twilio redelivers the same message: answered, nothing new.
    assert_eq!(fleet.twilio_post(&sms, &signed).await.status(), 200);
    let got = routed(&bus).await;
    assert_eq!(got.len(), 1);
    let e = &got[0].event;
    assert_eq!(e.platform, Platform::Sms);
    assert_eq!((e.sender_id.as_str(), e.chat_id.as_str()), (ADA, ADA));
    assert_eq!(e.text.as_deref(), Some("héllo from SMS 👋"));

    // STOP opts out (durably), START opts back in, HELP is answered: none is routed.
    let stop = twilio_sms("SM00000000000000000000000000000002", ADA, "Stop");
    assert_eq!(fleet.twilio_webhook(PUBLIC_URL, &stop).await.status(), 200);
    assert!(opted_out(&env, ADA).await);
    let help = twilio_sms("SM00000000000000000000000000000003", ADA, "help");
    let answer = fleet.twilio_webhook(PUBLIC_URL, &help).await;
    assert_eq!(answer.status(), 200);
    assert!(
        answer
            .text()
            .await
            .unwrap()
            .contains("<Message>Hermes: reply STOP to stop</Message>")
    );
    let start = twilio_sms("SM00000000000000000000000000000004", ADA, "START");
    assert_eq!(fleet.twilio_webhook(PUBLIC_URL, &start).await.status(), 200);
    assert!(!opted_out(&env, ADA).await);
    assert!(routed(&bus).await.is_empty(), "keywords start no run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sms_is_answered_through_the_fleet_its_status_tied_to_the_send_and_stop_honoured() {
    let api = twilio_fake().await;
    let model = openai_fake("Hello from Hermes").await;
    let mut env = TestEnv::new().await;
    sender_env(&mut env, &api);
    env.openai_mock(&model.uri());
    env.user(Platform::Sms, ADA, 10).await;
    let fleet = env.start(&Service::ALL).await;

    let sms = twilio_sms("SM00000000000000000000000000000010", ADA, "hi");
    assert_eq!(fleet.twilio_webhook(PUBLIC_URL, &sms).await.status(), 200);
    let sent = eventually(Duration::from_secs(30), "the answer sent", || async {
        twilio_sent(&api).await.into_iter().next()
    })
    .await;
    assert_eq!(sent["To"], ADA);
    assert_eq!(sent["From"], TWILIO_FROM);
    assert_eq!(sent["Body"], "Hello from Hermes");
    assert_eq!(sent["StatusCallback"], PUBLIC_URL);

    // Twilio reports the message delivered: the send it names moves.
    let sid = "SM00000000000000000000000000000001";
    let db = env.db();
    eventually(
        Duration::from_secs(10),
        "the send's SID recorded",
        || async {
            let c = db.get().await.ok()?;
            c.query_opt(
                "SELECT 1 FROM platform_sends WHERE platform_message_id = $1",
                &[&sid],
            )
            .await
            .ok()
            .flatten()
        },
    )
    .await;
    let status: Vec<(String, String)> = [
        ("MessageSid", sid),
        ("SmsSid", sid),
        ("MessageStatus", "delivered"),
        ("SmsStatus", "delivered"),
        ("To", ADA),
        ("From", TWILIO_FROM),
        ("AccountSid", TWILIO_SID),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(
        fleet.twilio_webhook(PUBLIC_URL, &status).await.status(),
        200
    );
    let c = db.get().await.unwrap();
    let row = c
        .query_one(
            "SELECT status FROM platform_sends WHERE platform_message_id = $1",
            &[&sid],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "delivered");

    // After STOP no reply reaches the number: it is parked unsent as `opted_out`.
    let stop = twilio_sms("SM00000000000000000000000000000011", ADA, "STOP");
    assert_eq!(fleet.twilio_webhook(PUBLIC_URL, &stop).await.status(), 200);
    let bus = env.bus().await;
    let late = reply(Platform::Sms, ADA, None, "a late answer");
    bus.publish(&late).await.unwrap();
    let parked = parked_one(&bus, Stage::Delivery, Duration::from_secs(20)).await;
    assert_eq!(parked.env.id, late.id);
    assert_eq!(parked.reason.as_deref(), Some("opted_out"));
    assert_eq!(twilio_sent(&api).await.len(), 1, "nothing more was sent");
}

/// A JPEG's signature and some bytes: enough for the type checks.
pub(crate) fn jpeg() -> Vec<u8> {
    let mut b = vec![0xff, 0xd8, 0xff, 0xe0];
    b.resize(300, 7);
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mms_photo_reaches_the_vision_model_through_twilios_authenticated_media_url() {
    let api = twilio_fake().await;
    let media_path = format!("/2010-04-01/Accounts/{TWILIO_SID}/Messages/MM1/Media/ME1");
    // Twilio's media URL takes the account's basic auth and redirects to its CDN.
    Mock::given(method("GET"))
        .and(path(media_path.clone()))
        .and(basic_auth(TWILIO_SID, TWILIO_TOKEN))
        .respond_with(
            ResponseTemplate::new(307)
                .insert_header("location", format!("{}/cdn/ME1.jpg", api.uri())),
        )
        .mount(&api)
        .await;
    Mock::given(method("GET"))
        .and(path("/cdn/ME1.jpg"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "image/jpeg")
                .set_body_bytes(jpeg()),
        )
        .mount(&api)
        .await;
    let model = openai_fake("A sunset").await;
    let mut env = TestEnv::new().await;
    sender_env(&mut env, &api);
    env.openai_mock(&model.uri())
        .set("HERMES_MEDIA_FETCH_ALLOW", "127.0.0.1");
    env.user(Platform::Sms, ADA, 10).await;
    let fleet = env.start(&Service::ALL).await;

    let mut mms = twilio_sms("MM1", ADA, "what is this?");
    mms.retain(|(k, _)| k != "NumMedia");
    mms.push(("NumMedia".into(), "1".into()));
    mms.push(("MediaUrl0".into(), format!("{}{media_path}", api.uri())));
    mms.push(("MediaContentType0".into(), "image/jpeg".into()));
    assert_eq!(fleet.twilio_webhook(PUBLIC_URL, &mms).await.status(), 200);
    eventually(Duration::from_secs(30), "the answer sent", || async {
        twilio_sent(&api).await.into_iter().next()
    })
    .await;
    assert!(
        crate::images::model_saw_jpeg(&model, &jpeg()).await,
        "the photo reached the model"
    );
    let cdn = api.received_requests().await.unwrap();
    let cdn = cdn.iter().find(|r| r.url.path() == "/cdn/ME1.jpg").unwrap();
    assert!(
        !cdn.headers.contains_key("authorization"),
        "Twilio's credentials never leave its API host"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_paced_and_retried_and_permanent_errors_are_parked_with_their_reasons() {
    let api = MockServer::start().await;
    twilio_messages()
        .and(body_string_contains("To=%2B1429"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(
                    json!({"code": 20429, "message": "Too Many Requests", "status": 429}),
                ),
        )
        .up_to_n_times(1)
        .mount(&api)
        .await;
    twilio_messages()
        .and(body_string_contains("To=%2B1400"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "code": 21211, "message": "The 'To' number +1400 is not a valid phone number.", "status": 400
        })))
        .mount(&api)
        .await;
    twilio_messages()
        .and(body_string_contains("To=%2B1610"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "code": 21610, "message": "Attempt to send to unsubscribed recipient", "status": 400
        })))
        .mount(&api)
        .await;
    twilio_messages()
        .respond_with(twilio_created())
        .mount(&api)
        .await;
    let mut env = TestEnv::new().await;
    sender_env(&mut env, &api);
    let _fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;

    waits_out_a_429(&bus, Platform::Sms, "+1429", || async {
        let sent = twilio_sent(&api).await;
        sent.iter().filter(|f| f["To"] == "+1429").count()
    })
    .await;

    let parked = parked_for(&bus, Platform::Sms, "+1400", "invalid_recipient").await;
    assert!(parked.detail.unwrap_or_default().contains("21211"));

    parked_for(&bus, Platform::Sms, "+1610", "opted_out").await;
}
