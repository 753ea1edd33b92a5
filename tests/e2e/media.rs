//! Media from chat platforms end to end (docs/channels.md, media): a Telegram photo and a
//! WhatsApp photo, sent as the platforms publish them, reach the fake vision model as
//! inline image blocks under the calorie-scan instruction (and operators see them as
//! references); a voice note is transcribed and answered, its transcript kept as the
//! message's text, but not for a user out of credit; without a transcription endpoint the
//! sender is told so. Bad input (a file id the platform refuses, a photo over the
//! limit, a content type that lies, a download that never ends, a document) gets a clear
//! reply and a metric each, nothing stuck and no credit spent.

use std::time::Duration;

use base64::Engine;
use hermes::Service;
use hermes_bus::Bus;
use hermes_db::api_keys::KeyScope;
use hermes_router::media::CANNOT_LISTEN;

use crate::agent_mcp::Mcp;
use crate::images::image_parts as image_urls;
use hermes_testkit::{
    Fleet, TestEnv, channel_inbound, eventually, metric, telegram_ok, telegram_send_message,
    telegram_sent,
};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{Media, MediaKind, Platform};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TG_TOKEN: &str = "777000:media-test-token-secret";
const TG_SECRET: &str = "tg-secret-0123456789";
const WA_APP_SECRET: &str = "wa-app-secret-0123";
const WA_TOKEN: &str = "wa-cloud-media-token";
const TG_USER: &str = "1111111";
const WA_USER: &str = "16315551181";
const TG_PHOTO: &str = "AgACAgIAAxkBAAIBbig";
const WA_PHOTO: &str = "1234567890123456";
const TG_VOICE: &str = "AwACAgIAAxkBAAIBvoice";
const CREDITS: i64 = 10;

/// A JPEG's signature and some bytes: enough for the type checks.
fn jpeg(len: usize) -> Vec<u8> {
    let mut b = vec![0xff, 0xd8, 0xff, 0xe0];
    b.resize(len, 7);
    b
}

/// An Ogg voice note's first bytes.
fn ogg() -> Vec<u8> {
    let mut b = b"OggS\x00\x02".to_vec();
    b.resize(200, 3);
    b
}

fn fixture(path: &str) -> Value {
    let at = format!(
        "{}/../shared/channels/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(at).unwrap()).unwrap()
}

/// The fake model: every call answered with `text`.
async fn model(text: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(hermes_testkit::openai_answer(text, 1, 1)),
        )
        .mount(&server)
        .await;
    server
}

/// Telegram's Bot API: `getFile` of `files` (id → path) and their downloads (path →
/// response), `sendMessage` always ok.
async fn telegram(files: Vec<(&str, &str, ResponseTemplate)>) -> MockServer {
    let server = MockServer::start().await;
    telegram_send_message(TG_TOKEN)
        .respond_with(telegram_ok())
        .mount(&server)
        .await;
    // Telegram answers an unknown file id with 400 and `ok: false`.
    Mock::given(method("GET"))
        .and(path(format!("/bot{TG_TOKEN}/getFile")))
        .respond_with(ResponseTemplate::new(400).set_body_json(
            json!({"ok": false, "error_code": 400, "description": "Bad Request: invalid file_id"}),
        ))
        .with_priority(10)
        .mount(&server)
        .await;
    for (id, file_path, download) in files {
        Mock::given(method("GET"))
            .and(path(format!("/bot{TG_TOKEN}/getFile")))
            .and(query_param("file_id", id))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "ok": true,
                "result": {"file_id": id, "file_unique_id": "u", "file_path": file_path}
            })))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(path(format!("/file/bot{TG_TOKEN}/{file_path}")))
            .respond_with(download)
            .mount(&server)
            .await;
    }
    server
}

/// The texts sent to the Telegram chat.
async fn sent(telegram: &MockServer) -> Vec<String> {
    telegram_sent(telegram)
        .await
        .into_iter()
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect()
}

/// Wait until the chat was sent `n` texts; returns them.
async fn sent_n(telegram: &MockServer, n: usize) -> Vec<String> {
    eventually(Duration::from_secs(30), "the replies", || async {
        let texts = sent(telegram).await;
        (texts.len() >= n).then_some(texts)
    })
    .await
}

/// The calls the fake model got, as JSON.
async fn calls(model: &MockServer) -> Vec<Value> {
    model
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| r.body_json().unwrap())
        .collect()
}

/// The call's system turns, joined.
fn system_text(call: &Value) -> String {
    call["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn data_url(bytes: &[u8]) -> String {
    format!(
        "data:image/jpeg;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// An environment with Telegram's and the model's fakes, downloads allowed on loopback
/// (where the fakes are), and photos of at most 1 KiB (the test photos are smaller; the
/// bad-input test sends one larger).
fn env_with(env: &mut TestEnv, model: &MockServer, telegram: &MockServer) {
    env.openai_mock(&model.uri())
        .set("HERMES_IMAGE_MAX_BYTES", "1024")
        .set("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .set("TELEGRAM_API_BASE_URL", &telegram.uri())
        .set("TELEGRAM_WEBHOOK_SECRET", TG_SECRET)
        .set("HERMES_MEDIA_FETCH_ALLOW", "127.0.0.1");
}

/// One series of `hermes_media_fetch_total`.
async fn fetches(fleet: &Fleet, platform: &str, kind: &str, outcome: &str) -> Option<f64> {
    let series = format!(
        "hermes_media_fetch_total{{kind=\"{kind}\",outcome=\"{outcome}\",platform=\"{platform}\"}}"
    );
    metric(&fleet.metrics().await, &series)
}

async fn credits(env: &TestEnv, user: &hermes_db::users::User) -> i64 {
    let c = env.db().get().await.unwrap();
    c.query_one("SELECT credits FROM users WHERE id = $1", &[&user.id])
        .await
        .unwrap()
        .get(0)
}

/// A Telegram message from the test's user carrying `media`, straight to the router.
async fn telegram_media(bus: &Bus, kind: MediaKind, file_id: &str) -> RunId {
    let mut inbound = channel_inbound(Platform::Telegram, TG_USER, "");
    inbound.event.text = None;
    inbound.event.media = vec![Media {
        kind,
        platform_id: Some(file_id.into()),
        url: None,
        mime_type: None,
    }];
    let run = RunId::new();
    bus.publish(&Envelope::new(run, None, &inbound))
        .await
        .unwrap();
    run
}

/// Every run of the test closed (none stuck open).
async fn all_closed(env: &TestEnv, n: i64) {
    eventually(Duration::from_secs(30), "every run closed", || async {
        let c = env.db().get().await.ok()?;
        let open: i64 = c
            .query_one(
                "SELECT count(*) FILTER (WHERE status NOT IN ('completed', 'failed')), count(*) \
                 FROM agent_runs",
                &[],
            )
            .await
            .ok()
            .map(|r| r.get::<_, i64>(0) + (n - r.get::<_, i64>(1)))?;
        (open == 0).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_and_whatsapp_photos_reach_the_vision_model_with_the_calorie_scan_instruction() {
    let model = model("About 650 kcal.").await;
    let photo = jpeg(300);
    let telegram = telegram(vec![(
        TG_PHOTO,
        "photos/file_1.jpg",
        ResponseTemplate::new(200).set_body_raw(photo.clone(), "image/jpeg"),
    )])
    .await;
    // Meta's media API: the id's URL, then the bytes, both with the access token.
    let meta = MockServer::start().await;
    let wa_photo = jpeg(400);
    Mock::given(method("GET"))
        .and(path(format!("/{WA_PHOTO}")))
        .and(header("authorization", format!("Bearer {WA_TOKEN}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "messaging_product": "whatsapp", "url": format!("{}/media/download/abc?x=1", meta.uri()),
            "mime_type": "image/jpeg", "sha256": "h", "file_size": 400, "id": WA_PHOTO
        })))
        .mount(&meta)
        .await;
    Mock::given(method("GET"))
        .and(path("/media/download/abc"))
        .and(header("authorization", format!("Bearer {WA_TOKEN}")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(wa_photo.clone(), "image/jpeg"))
        .mount(&meta)
        .await;
    Mock::given(method("POST"))
        .and(path("/PHONE_ID/messages"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"messages": [{"id": "wamid.out"}]})),
        )
        .mount(&meta)
        .await;
    let mut env = TestEnv::new().await;
    env_with(&mut env, &model, &telegram);
    env.set("WHATSAPP_APP_SECRET", WA_APP_SECRET)
        .set("WHATSAPP_VERIFY_TOKEN", "wa-verify")
        .set("WHATSAPP_ACCESS_TOKEN", WA_TOKEN)
        .set("WHATSAPP_PHONE_NUMBER_ID", "PHONE_ID")
        .set("WHATSAPP_API_BASE_URL", &meta.uri());
    let tg_user = env.user(Platform::Telegram, TG_USER, CREDITS).await;
    env.user(Platform::Whatsapp, WA_USER, CREDITS).await;
    let fleet = env.start(&Service::ALL).await;

    // Telegram's published photo update, captioned with the question.
    let mut update = fixture("telegram/photo_caption.json");
    update["message"]["caption"] = json!("how many calories?");
    fleet.telegram_update(TG_SECRET, &update).await;
    assert_eq!(sent_n(&telegram, 1).await, ["About 650 kcal."]);
    let first = &calls(&model).await[0];
    assert_eq!(image_urls(first), [data_url(&photo)]);
    assert!(
        system_text(first).contains("wants a calorie scan"),
        "{}",
        system_text(first)
    );
    // The bot token is in the file URL only, never in what reached the model.
    assert!(!first.to_string().contains(TG_TOKEN));
    // Operators see the photo as a reference (its file id), never a download URL.
    let (_, op_key) = crate::operator_mcp::key_with(&env, &[KeyScope::Operator]).await;
    let c = env.db().get().await.unwrap();
    let inbound: i64 = c
        .query_one(
            "SELECT id FROM interactions WHERE direction = 'inbound'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let media = Mcp::operator(&fleet, &op_key)
        .ok("attachments_fetch", json!({ "message_id": inbound }))
        .await;
    assert_eq!(
        media["attachments"],
        json!([{"kind": "image", "platform": "telegram", "file_id": TG_PHOTO, "url": null, "mime_type": null}])
    );
    assert!(!media.to_string().contains(TG_TOKEN));

    // WhatsApp's published image message, through the Cloud API's media endpoint.
    let mut payload = fixture("whatsapp/image.json");
    payload["entry"][0]["changes"][0]["value"]["messages"][0]["image"]["caption"] =
        json!("how many calories?");
    fleet.whatsapp_message(WA_APP_SECRET, &payload).await;
    // (Other calls are memory extractions after each answer.)
    let wa_image = data_url(&wa_photo);
    let second = eventually(Duration::from_secs(30), "the WhatsApp call", || async {
        calls(&model)
            .await
            .into_iter()
            .find(|c| image_urls(c) == [wa_image.clone()])
    })
    .await;
    assert!(system_text(&second).contains("wants a calorie scan"));
    eventually(Duration::from_secs(30), "the WhatsApp reply", || async {
        meta.received_requests()
            .await?
            .iter()
            .any(|r| r.url.path() == "/PHONE_ID/messages")
            .then_some(())
    })
    .await;

    for platform in ["telegram", "whatsapp"] {
        let ok = fetches(&fleet, platform, "image", "ok").await;
        assert_eq!(ok, Some(1.0), "{platform}");
    }
    // Charged like any answered message.
    assert_eq!(credits(&env, &tg_user).await, CREDITS - 1);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_transcribed_and_answered_and_its_transcript_is_the_text() {
    let model = model("It is 9 pm in Tokyo.").await;
    let telegram = telegram(vec![(
        TG_VOICE,
        "voice/file_2.oga",
        // Telegram's file server may not name the type: the bytes do.
        ResponseTemplate::new(200).set_body_raw(ogg(), "application/octet-stream"),
    )])
    .await;
    let whisper = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/audio/transcriptions"))
        .and(header("authorization", "Bearer transcribe-key"))
        .and(body_string_contains("whisper-1"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"text": "what time is it in Tokyo"})),
        )
        .mount(&whisper)
        .await;
    let mut env = TestEnv::new().await;
    env_with(&mut env, &model, &telegram);
    env.set("HERMES_TRANSCRIBE_URL", &format!("{}/v1", whisper.uri()))
        .set("HERMES_TRANSCRIBE_KEY", "transcribe-key");
    env.user(Platform::Telegram, TG_USER, CREDITS).await;
    let fleet = env.start(&Service::ALL).await;

    fleet
        .telegram_update(TG_SECRET, &fixture("telegram/voice.json"))
        .await;
    assert_eq!(sent_n(&telegram, 1).await, ["It is 9 pm in Tokyo."]);
    let call = &calls(&model).await[0];
    let last = call["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], "what time is it in Tokyo");
    // The transcription got the voice note's bytes.
    let sent_audio = &whisper.received_requests().await.unwrap()[0].body;
    assert!(sent_audio.windows(4).any(|w| w == b"OggS"));
    // The transcript is the run's text, as the history keeps it.
    let c = env.db().get().await.unwrap();
    let text: Option<String> = c
        .query_one("SELECT input_text FROM agent_runs", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(text.as_deref(), Some("what time is it in Tokyo"));
    assert_eq!(
        fetches(&fleet, "telegram", "voice", "transcribed").await,
        Some(1.0)
    );

    // Out of credit: the upgrade prompt, and nothing is transcribed for it.
    c.execute("UPDATE users SET credits = 0", &[])
        .await
        .unwrap();
    let mut again = fixture("telegram/voice.json");
    again["update_id"] = json!(10007);
    again["message"]["message_id"] = json!(1372);
    fleet.telegram_update(TG_SECRET, &again).await;
    let texts = sent_n(&telegram, 2).await;
    assert!(texts[1].contains("out of credits"), "{}", texts[1]);
    assert_eq!(whisper.received_requests().await.unwrap().len(), 1);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_transcription_a_voice_note_gets_the_clear_reply_and_costs_nothing() {
    let model = model("unused").await;
    let telegram = telegram(Vec::new()).await;
    let mut env = TestEnv::new().await;
    env_with(&mut env, &model, &telegram);
    let user = env.user(Platform::Telegram, TG_USER, CREDITS).await;
    let fleet = env.start(&Service::ALL).await;

    fleet
        .telegram_update(TG_SECRET, &fixture("telegram/voice.json"))
        .await;
    assert_eq!(sent_n(&telegram, 1).await, [CANNOT_LISTEN]);
    all_closed(&env, 1).await;
    assert!(model.received_requests().await.unwrap().is_empty());
    // Nothing was downloaded either.
    assert!(
        telegram
            .received_requests()
            .await
            .unwrap()
            .iter()
            .all(|r| r.url.path().ends_with("/sendMessage"))
    );
    assert_eq!(credits(&env, &user).await, CREDITS);
    assert_eq!(
        fetches(&fleet, "telegram", "voice", "not_configured").await,
        Some(1.0)
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_files_each_get_a_clear_reply_and_a_metric_and_nothing_is_stuck_or_charged() {
    let model = model("unused").await;
    let telegram = telegram(vec![
        (
            "BIG",
            "photos/big.jpg",
            ResponseTemplate::new(200).set_body_raw(jpeg(4096), "image/jpeg"),
        ),
        (
            "LIE",
            "photos/lie.jpg",
            ResponseTemplate::new(200)
                .set_body_raw(b"<html>not a photo</html>".to_vec(), "image/jpeg"),
        ),
        (
            "SLOW",
            "photos/slow.jpg",
            // Far beyond the deadline: the download is cut, not waited for.
            ResponseTemplate::new(200)
                .set_body_raw(jpeg(100), "image/jpeg")
                .set_delay(Duration::from_secs(3600)),
        ),
    ])
    .await;
    let mut env = TestEnv::new().await;
    env_with(&mut env, &model, &telegram);
    env.set("HERMES_MEDIA_DEADLINE_SECS", "1");
    let user = env.user(Platform::Telegram, TG_USER, CREDITS).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;

    let cases = [
        (
            MediaKind::Image,
            "REFUSED-BY-TELEGRAM",
            "may have expired",
            "refused",
        ),
        (MediaKind::Image, "BIG", "too large", "too_large"),
        (MediaKind::Image, "LIE", "isn't in a format", "wrong_type"),
        (MediaKind::Image, "SLOW", "took too long", "timeout"),
        (
            MediaKind::Document,
            "DOC",
            "can't open documents",
            "unsupported",
        ),
    ];
    for (i, (kind, file_id, says, outcome)) in cases.iter().enumerate() {
        telegram_media(&bus, *kind, file_id).await;
        let texts = sent_n(&telegram, i + 1).await;
        assert!(texts[i].contains(says), "{file_id}: {}", texts[i]);
        assert!(!texts[i].contains(TG_TOKEN), "{}", texts[i]);
        let counted = fetches(&fleet, "telegram", kind.as_str(), outcome).await;
        assert_eq!(counted, Some(1.0), "{file_id}: {outcome}");
    }
    all_closed(&env, cases.len() as i64).await;
    assert!(model.received_requests().await.unwrap().is_empty());
    // A refused file costs nothing: charged photos were refunded, the document never charged.
    eventually(Duration::from_secs(30), "the refunds", || async {
        (credits(&env, &user).await == CREDITS).then_some(())
    })
    .await;
    // Nothing parked, nothing requeued as poison.
    let metrics = fleet.metrics().await;
    for outcome in ["parked", "rejected", "requeued"] {
        assert!(
            !metrics
                .lines()
                .any(|l| l.starts_with("hermes_bus_messages_total")
                    && l.contains(&format!("outcome=\"{outcome}\""))),
            "{outcome}"
        );
    }
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_that_outlasts_the_deadline_of_the_calls_images_fails_the_run_told_and_refunded() {
    let model = model("unused").await;
    let telegram = telegram(vec![(
        "SLOW",
        "photos/slow.jpg",
        ResponseTemplate::new(200)
            .set_body_raw(jpeg(100), "image/jpeg")
            .set_delay(Duration::from_secs(3600)),
    )])
    .await;
    let mut env = TestEnv::new().await;
    env_with(&mut env, &model, &telegram);
    // The file's own deadline is an hour away: the one deadline over the call's images cuts.
    env.set("HERMES_MEDIA_DEADLINE_SECS", "3600")
        .set("HERMES_IMAGE_FETCH_DEADLINE_SECS", "1");
    let user = env.user(Platform::Telegram, TG_USER, CREDITS).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;

    let run = telegram_media(&bus, MediaKind::Image, "SLOW").await;
    let texts = sent_n(&telegram, 1).await;
    assert!(texts[0].contains("took too long"), "{}", texts[0]);
    all_closed(&env, 1).await;
    let c = env.db().get().await.unwrap();
    let status: String = c
        .query_one(
            "SELECT status FROM agent_runs WHERE id = $1",
            &[&run.as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "failed");
    eventually(Duration::from_secs(30), "the refund", || async {
        (credits(&env, &user).await == CREDITS).then_some(())
    })
    .await;
    let refunds: i64 = c
        .query_one(
            "SELECT count(*) FROM credit_ledger WHERE run_id = $1 AND reason = 'refund'",
            &[&run.as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(refunds, 1);
    assert!(model.received_requests().await.unwrap().is_empty());
    let deadline = metric(
        &fleet.metrics().await,
        "hermes_image_inline_total{outcome=\"deadline\"}",
    );
    assert_eq!(deadline, Some(1.0));
    fleet.stop().await.unwrap();
}
