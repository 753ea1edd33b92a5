//! The media fetcher against fakes of the platforms: Telegram's `getFile` and file server,
//! 360dialog's media proxy, the transcription endpoint; and the bot token never in an error.

use std::time::Duration;

use hermes_config::Config;
use hermes_media::{MediaError, MediaFetcher, Outcome, Transcriber, Want};
use hermes_types::model::{Media, MediaKind, MediaRef, Platform};
use prometheus::{IntCounterVec, Opts};
use serde_json::json;
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TOKEN: &str = "555111:fetch-test-secret-token";

fn config(vars: &[(&str, String)]) -> Config {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    Config::from_lookup(
        &|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()),
        None,
    )
    .expect("test configuration")
}

fn counter() -> IntCounterVec {
    IntCounterVec::new(
        Opts::new("hermes_media_fetch_total", "test"),
        &["platform", "kind", "outcome"],
    )
    .unwrap()
}

fn item(platform: Platform, kind: MediaKind, id: &str) -> MediaRef {
    MediaRef {
        platform,
        media: Media {
            kind,
            platform_id: Some(id.into()),
            url: None,
            mime_type: None,
        },
    }
}

/// Why `fetcher` refuses `item`.
async fn refusal(fetcher: &MediaFetcher, item: MediaRef, want: Want) -> MediaError {
    match fetcher.fetch(&item, want).await {
        Ok(_) => panic!("the fetch succeeded"),
        Err(e) => e,
    }
}

fn png() -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    b.resize(100, 1);
    b
}

async fn telegram() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/bot{TOKEN}/getFile")))
        .and(query_param("file_id", "GOOD"))
        .respond_with(ResponseTemplate::new(200).set_body_json(
            json!({"ok": true, "result": {"file_id": "GOOD", "file_path": "photos/a.png", "file_size": 100}}),
        ))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/file/bot{TOKEN}/photos/a.png")))
        .respond_with(ResponseTemplate::new(200).set_body_raw(png(), "image/png"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/bot{TOKEN}/getFile")))
        .respond_with(ResponseTemplate::new(400).set_body_json(
            json!({"ok": false, "error_code": 400, "description": "Bad Request: invalid file_id"}),
        ))
        .with_priority(10)
        .mount(&server)
        .await;
    server
}

fn telegram_config(server: &MockServer, allow: bool) -> Config {
    let mut vars = vec![
        ("TELEGRAM_BOT_TOKEN", TOKEN.to_string()),
        ("TELEGRAM_API_BASE_URL", server.uri()),
    ];
    if allow {
        vars.push(("HERMES_MEDIA_FETCH_ALLOW", "127.0.0.1".into()));
    }
    config(&vars)
}

#[tokio::test]
async fn a_telegram_photo_is_found_by_get_file_and_downloaded() {
    let server = telegram().await;
    let counted = counter();
    let fetcher = MediaFetcher::new(&telegram_config(&server, true), counted.clone());
    let got = fetcher
        .fetch(
            &item(Platform::Telegram, MediaKind::Image, "GOOD"),
            Want::Image,
        )
        .await
        .unwrap();
    assert_eq!(got.mime, "image/png");
    assert_eq!(got.bytes, png());
    assert!(got.image_block().url.starts_with("data:image/png;base64,"));
}

#[tokio::test]
async fn no_refusal_shows_the_bot_token() {
    let server = telegram().await;
    let counted = counter();
    // Refused by Telegram, and refused by the guard (loopback not allowlisted).
    for (allow, outcome) in [(true, Outcome::Refused), (false, Outcome::AddressRefused)] {
        let fetcher = MediaFetcher::new(&telegram_config(&server, allow), counted.clone());
        let e = refusal(
            &fetcher,
            item(Platform::Telegram, MediaKind::Image, "BAD"),
            Want::Image,
        )
        .await;
        assert_eq!(e.outcome(), outcome);
        for shown in [
            e.to_string(),
            format!("{e:?}"),
            e.user_message(MediaKind::Image),
        ] {
            assert!(!shown.contains(TOKEN), "{shown}");
            assert!(!shown.contains("fetch-test-secret"), "{shown}");
        }
    }
    let n = counted
        .with_label_values(&["telegram", "image", "refused"])
        .get();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_download_that_never_ends_is_cut_at_the_deadline() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/bot{TOKEN}/getFile")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "result": {"file_path": "a.png"}}))
                .set_delay(Duration::from_secs(3600)),
        )
        .mount(&server)
        .await;
    let mut vars = vec![
        ("TELEGRAM_BOT_TOKEN", TOKEN.to_string()),
        ("TELEGRAM_API_BASE_URL", server.uri()),
        ("HERMES_MEDIA_FETCH_ALLOW", "127.0.0.1".into()),
    ];
    vars.push(("HERMES_MEDIA_DEADLINE_SECS", "1".into()));
    let fetcher = MediaFetcher::new(&config(&vars), counter());
    let e = refusal(
        &fetcher,
        item(Platform::Telegram, MediaKind::Image, "ANY"),
        Want::Image,
    )
    .await;
    assert!(matches!(e, MediaError::Timeout { secs: 1 }), "{e}");
}

#[tokio::test]
async fn a_360dialog_file_comes_through_its_proxy_with_the_key() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/4455"))
        .and(header("d360-api-key", "d360-key"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "url": "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=4455&ext=1",
            "mime_type": "audio/ogg", "id": "4455"
        })))
        .mount(&server)
        .await;
    let mut ogg = b"OggS\x00".to_vec();
    ogg.resize(64, 0);
    Mock::given(method("GET"))
        .and(path("/whatsapp_business/attachments/"))
        .and(query_param("mid", "4455"))
        .and(header("d360-api-key", "d360-key"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(ogg.clone(), "audio/ogg"))
        .mount(&server)
        .await;
    let cfg = config(&[
        ("D360_API_KEY", "d360-key".into()),
        ("D360_BASE_URL", server.uri()),
        ("HERMES_MEDIA_FETCH_ALLOW", "127.0.0.1".into()),
    ]);
    let fetcher = MediaFetcher::new(&cfg, counter());
    let got = fetcher
        .fetch(
            &item(Platform::Whatsapp, MediaKind::Voice, "4455"),
            Want::Audio,
        )
        .await
        .unwrap();
    assert_eq!(got.mime, "audio/ogg");

    let whisper = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/audio/transcriptions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"text": " hello there "})))
        .mount(&whisper)
        .await;
    let cfg = config(&[("HERMES_TRANSCRIBE_URL", whisper.uri())]);
    let transcriber = Transcriber::new(cfg.media.transcribe.as_ref())
        .unwrap()
        .unwrap();
    assert_eq!(transcriber.transcribe(&got).await.unwrap(), "hello there");
    let sent = &whisper.received_requests().await.unwrap()[0];
    let body = String::from_utf8_lossy(&sent.body);
    assert!(body.contains("name=\"model\"\r\n\r\nwhisper-1"), "{body}");
    assert!(body.contains("filename=\"voice.ogg\""), "{body}");
}

#[tokio::test]
async fn a_media_id_meta_refuses_is_refused_and_its_failures_are_unavailable() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v21.0/404404"))
        .and(header("authorization", "Bearer cloud-token"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({
            "error": {"message": "Unsupported get request.", "code": 100}
        })))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v21.0/500500"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&server)
        .await;
    let cfg = config(&[
        ("WHATSAPP_ACCESS_TOKEN", "cloud-token".into()),
        ("WHATSAPP_PHONE_NUMBER_ID", "PHONE".into()),
        ("WHATSAPP_API_BASE_URL", format!("{}/v21.0", server.uri())),
        ("HERMES_MEDIA_FETCH_ALLOW", "127.0.0.1".into()),
    ]);
    let fetcher = MediaFetcher::new(&cfg, counter());
    for (id, outcome) in [
        ("404404", Outcome::Refused),
        ("500500", Outcome::Unavailable),
    ] {
        let e = refusal(
            &fetcher,
            item(Platform::Whatsapp, MediaKind::Image, id),
            Want::Image,
        )
        .await;
        assert_eq!(e.outcome(), outcome, "{id}: {e}");
        assert!(!format!("{e} {e:?}").contains("cloud-token"));
    }
    // Without the platform's credentials nothing is requested.
    let fetcher = MediaFetcher::new(&config(&[]), counter());
    let e = refusal(
        &fetcher,
        item(Platform::Whatsapp, MediaKind::Image, "1"),
        Want::Image,
    )
    .await;
    assert_eq!(e.outcome(), Outcome::NoCredentials);
}

#[tokio::test]
async fn an_instagram_attachment_is_its_url_and_a_lying_type_is_refused() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/ig/photo.png"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(png(), "image/png"))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/ig/lie.png"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(png(), "image/jpeg"))
        .mount(&server)
        .await;
    let cfg = config(&[("HERMES_MEDIA_FETCH_ALLOW", "127.0.0.1".into())]);
    let fetcher = MediaFetcher::new(&cfg, counter());
    let at = |name: &str| MediaRef {
        platform: Platform::Instagram,
        media: Media {
            kind: MediaKind::Image,
            platform_id: None,
            url: Some(format!("{}/ig/{name}", server.uri())),
            mime_type: None,
        },
    };
    let got = fetcher.fetch(&at("photo.png"), Want::Image).await.unwrap();
    assert_eq!(got.mime, "image/png");
    let e = refusal(&fetcher, at("lie.png"), Want::Image).await;
    assert_eq!(e.outcome(), Outcome::WrongType, "{e}");
}
