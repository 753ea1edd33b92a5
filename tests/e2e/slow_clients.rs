//! Ingest under slow clients: headers and bodies that take for ever are cut within their
//! bounds, and a wrong header secret is refused before the body is read
//! (`docs/security.md`, "The front door under slow or hostile clients").

use std::time::{Duration, Instant};

use hermes::Service;
use hermes_testkit::TestEnv;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SECRET: &str = "telegram-secret-0123456789";

/// An ingest whose header and body bounds are one second.
async fn ingest() -> (TestEnv, hermes_testkit::Fleet) {
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .set("HERMES_HTTP_HEADER_TIMEOUT_SECS", "1")
        .set("HERMES_HTTP_BODY_TIMEOUT_SECS", "1");
    let fleet = env.start(&[Service::Ingest]).await;
    (env, fleet)
}

/// Everything the server sends until it closes the connection, bounded by `limit` (a hang
/// is a failure, not a wait).
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> String {
    let mut got = Vec::new();
    tokio::time::timeout(limit, stream.read_to_end(&mut got))
        .await
        .expect("the server cut the connection within the bound")
        .ok();
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_finishes_its_headers_is_cut() {
    let (_env, fleet) = ingest().await;
    let mut stream = TcpStream::connect(fleet.http).await.unwrap();
    let started = Instant::now();
    stream
        .write_all(b"POST /webhooks/telegram HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    // The header block never ends: the server must hang up on its own.
    read_until_closed(&mut stream, Duration::from_secs(10)).await;
    assert!(started.elapsed() >= Duration::from_millis(900));
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_ends_is_cut_with_408() {
    let (_env, fleet) = ingest().await;
    let mut stream = TcpStream::connect(fleet.http).await.unwrap();
    let head = format!(
        "POST /webhooks/telegram HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         x-telegram-bot-api-secret-token: {SECRET}\r\ncontent-length: 1000\r\n\r\n{{\"update_id\":"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut stream, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout"), "{answer}");
    let metrics = fleet.metrics().await;
    assert!(
        metrics.contains("hermes_http_slow_clients_total{phase=\"body\"} 1"),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_header_secret_is_refused_before_the_body_is_read() {
    let mut env = TestEnv::new().await;
    // No body bound to speak of: only checking the header first answers in time.
    env.set("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .set("HERMES_HTTP_BODY_TIMEOUT_SECS", "600")
        .set("D360_WEBHOOK_TOKEN", "d360-token-0123456789");
    let fleet = env.start(&[Service::Ingest]).await;
    for (path, header) in [
        (
            "/webhooks/telegram",
            "x-telegram-bot-api-secret-token: wrong",
        ),
        ("/webhooks/360dialog", "x-hermes-webhook-token: wrong"),
        ("/webhooks/360dialog/wrong", "x-other: 1"),
        (
            "/v1/chat/completions",
            "authorization: Bearer wrong-key-0123456789",
        ),
    ] {
        let mut stream = TcpStream::connect(fleet.http).await.unwrap();
        // Headers announce a body that is never sent.
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             {header}\r\ncontent-length: 100000\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut got = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut got))
            .await
            .unwrap_or_else(|_| panic!("{path}: refused without waiting for the body"))
            .unwrap();
        let answer = String::from_utf8_lossy(&got[..n]);
        assert!(answer.starts_with("HTTP/1.1 401"), "{path}: {answer}");
    }
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_without_the_secret_is_refused_even_when_every_slot_is_taken() {
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .set("HERMES_MAX_IN_FLIGHT", "1")
        .set("HERMES_HTTP_BODY_TIMEOUT_SECS", "600");
    let fleet = env.start(&[Service::Ingest]).await;
    // The only slot: a caller with the secret whose body never ends.
    let mut holder = TcpStream::connect(fleet.http).await.unwrap();
    let head = format!(
        "POST /webhooks/telegram HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         x-telegram-bot-api-secret-token: {SECRET}\r\ncontent-length: 1000\r\n\r\n{{"
    );
    holder.write_all(head.as_bytes()).await.unwrap();
    let http = reqwest::Client::new();
    let post = |secret: &'static str| {
        http.post(fleet.url("/webhooks/telegram"))
            .header("x-telegram-bot-api-secret-token", secret)
            .header("content-type", "application/json")
            .body(r#"{"update_id": 1}"#)
            .send()
    };
    hermes_testkit::eventually(Duration::from_secs(10), "the slot taken", || async {
        (post(SECRET).await.ok()?.status() == 503).then_some(())
    })
    .await;
    // The secret is checked before a slot is taken: no 503 for a caller without it.
    assert_eq!(post("wrong").await.unwrap().status(), 401);
    drop(holder);
    fleet.stop().await.unwrap();
}
