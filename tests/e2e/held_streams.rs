//! What one caller may hold (docs/security.md, "No caller can hurt another"): a key holds at
//! most `HERMES_STREAMS_PER_KEY` requests open (429 `too_many_streams` with `Retry-After`
//! beyond, nothing started), a stream ends after `HERMES_STREAM_MAX_SECS`, and without
//! `API_SERVER_KEY` only requests naming a loopback host are served. A request id
//! (`X-Request-Id`) names one run, however often it is retried.
//!
//! The runs here are started with ingest alone: nobody routes them, so their event streams
//! stay open for as long as the server lets them.

use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys::{self, KeyScope};
use hermes_testkit::{Fleet, KEY, TestEnv, eventually, metric};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A key with the `chat` scope (runs and their events), as its secret.
async fn chat_key(env: &TestEnv) -> String {
    let c = env.db().get().await.unwrap();
    let created = api_keys::create(&c, "busy", None, None).await.unwrap();
    api_keys::set_scopes(&c, created.key.id, &[KeyScope::Chat])
        .await
        .unwrap();
    created.secret_key
}

/// Start a run as `key`; its id.
async fn start_run(fleet: &Fleet, key: &str) -> String {
    let resp = reqwest::Client::new()
        .post(fleet.url("/v1/runs"))
        .bearer_auth(key)
        .json(&json!({"input": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    let body: Value = resp.json().await.unwrap();
    body["run_id"].as_str().unwrap().to_string()
}

/// Open the event stream of `run` as `key`.
async fn events(fleet: &Fleet, key: &str, run: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(fleet.url(&format!("/v1/runs/{run}/events")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_holds_at_most_its_streams_and_one_more_is_429_with_retry_after() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_STREAMS_PER_KEY", "2");
    let fleet = env.start(&[Service::Ingest]).await;
    let key = chat_key(&env).await;
    let run = start_run(&fleet, &key).await;

    let first = events(&fleet, &key, &run).await;
    let second = events(&fleet, &key, &run).await;
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    // A third request of the key, held or not, is refused before anything runs.
    let third = events(&fleet, &key, &run).await;
    assert_eq!(third.status(), 429);
    assert_eq!(third.headers()["retry-after"], "2");
    let body: Value = third.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_streams", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("holds 2 requests")
    );
    let refused = reqwest::Client::new()
        .post(fleet.url("/v1/runs"))
        .bearer_auth(&key)
        .json(&json!({"input": "one more"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        429,
        "no run is started for a refused caller"
    );
    // Other callers are not held back: the operator key, and another key.
    assert_eq!(events(&fleet, KEY, &run).await.status(), 200);
    let other = chat_key(&env).await;
    let own = start_run(&fleet, &other).await;
    assert_eq!(events(&fleet, &other, &own).await.status(), 200);
    let metrics = fleet.metrics().await;
    assert_eq!(
        metric(&metrics, "hermes_key_streams_refused_total"),
        Some(2.0)
    );

    // A caller that hangs up frees its slot.
    drop(first);
    eventually(Duration::from_secs(30), "the slot freed", || async {
        let resp = events(&fleet, &key, &run).await;
        (resp.status() == 200).then_some(resp)
    })
    .await;
    drop(second);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_stream_ends_after_its_lifetime() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_STREAM_MAX_SECS", "1");
    let fleet = env.start(&[Service::Ingest]).await;
    let key = chat_key(&env).await;
    let run = start_run(&fleet, &key).await;
    let resp = events(&fleet, &key, &run).await;
    assert_eq!(resp.status(), 200);
    // The run never ends (nobody routes it): only the lifetime ends its stream.
    let body = tokio::time::timeout(Duration::from_secs(30), resp.text())
        .await
        .expect("the stream ended")
        .unwrap();
    assert!(body.contains("event: run.queued"), "{body}");
    assert!(
        body.contains("event: hermes.stream.closed") && body.contains("\"reason\":\"lifetime\""),
        "{body}"
    );
    let metrics = fleet.metrics().await;
    assert_eq!(
        metric(
            &metrics,
            "hermes_http_streams_cut_total{reason=\"lifetime\"}"
        ),
        Some(1.0)
    );
    fleet.stop().await.unwrap();
}

/// A raw request to `fleet` with `host` as its `Host` header; the status line's code.
async fn status_for_host(fleet: &Fleet, host: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(fleet.http).await.unwrap();
    let request = format!("GET /v1/models HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer[9..12].parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_only_requests_naming_a_loopback_host_are_served() {
    let mut env = TestEnv::new().await;
    env.unset("API_SERVER_KEY");
    let fleet = env.start(&[Service::Ingest]).await;
    let port = fleet.http.port();
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "[::1]".to_string(),
    ] {
        assert_eq!(status_for_host(&fleet, &host).await, 200, "{host}");
    }
    // A rebound name reaches 127.0.0.1 but says its own name.
    for host in [format!("evil.example:{port}"), "10.0.0.8".to_string()] {
        assert_eq!(status_for_host(&fleet, &host).await, 403, "{host}");
    }
    let metrics = fleet.metrics().await;
    assert_eq!(
        metric(&metrics, "hermes_http_host_refused_total"),
        Some(2.0)
    );
    fleet.stop().await.unwrap();

    // With a key the check is off (the key is the guard).
    let env = TestEnv::new().await;
    let fleet = env.start(&[Service::Ingest]).await;
    let resp = reqwest::Client::new()
        .get(fleet.url("/v1/models"))
        .header("host", "api.example")
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_ingest_refuses_to_serve_a_non_loopback_address() {
    let mut env = TestEnv::new().await;
    env.unset("API_SERVER_KEY");
    let config = env.config();
    // HERMES_HTTP_ADDR says loopback; the listener handed over does not.
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let result = hermes::run(
        config,
        &[Service::Ingest],
        hermes::Listeners {
            http: Some(listener),
            admin: None,
        },
        std::future::pending(),
    )
    .await;
    let e = result.expect_err("served a non-loopback address without a key");
    assert!(
        format!("{e:#}").contains("API_SERVER_KEY is required"),
        "{e:#}"
    );
}

/// The fake model, answering each call with `text` and counting the calls.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_names_one_run_however_often_the_request_is_sent() {
    let model = model("hello there").await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&model.uri());
    let fleet = env.start(&Service::ALL).await;
    let http = reqwest::Client::new();
    let chat = |request_id: &'static str| {
        http.post(fleet.url("/v1/chat/completions"))
            .bearer_auth(KEY)
            .header("x-request-id", request_id)
            .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };
    // A retry (after a 503, say) names the same run, answered once.
    let first = chat("req-7").await.unwrap();
    assert_eq!(first.status(), 200);
    let run = first.headers()["x-hermes-run-id"].clone();
    let again = chat("req-7").await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["x-hermes-run-id"], run);
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "hello there");
    assert_eq!(model.received_requests().await.unwrap().len(), 1);
    // Another request id is another run.
    let other = chat("req-8").await.unwrap();
    assert_ne!(other.headers()["x-hermes-run-id"], run);

    // The REST channel: without a message_id, the request id names the run.
    let rest = |request_id: &'static str| {
        http.post(fleet.url("/v1/messages"))
            .bearer_auth(KEY)
            .header("x-request-id", request_id)
            .json(&json!({"sender_id": "alice", "text": "hi"}))
            .send()
    };
    let a: Value = rest("msg-1").await.unwrap().json().await.unwrap();
    let b: Value = rest("msg-1").await.unwrap().json().await.unwrap();
    assert_eq!(a["run_id"], b["run_id"], "{a} {b}");
    let c = env.db().get().await.unwrap();
    let run_id: uuid::Uuid = a["run_id"].as_str().unwrap().parse().unwrap();
    eventually(Duration::from_secs(30), "the REST run routed", || async {
        let n: i64 = c
            .query_one("SELECT count(*) FROM agent_runs WHERE id = $1", &[&run_id])
            .await
            .ok()?
            .get(0);
        (n == 1).then_some(())
    })
    .await;
    let rest_runs: i64 = c
        .query_one(
            "SELECT count(*) FROM agent_runs WHERE platform = 'rest'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(rest_runs, 1);
    // A request id that is not one is refused, naming the header.
    let resp = http
        .post(fleet.url("/v1/chat/completions"))
        .bearer_auth(KEY)
        .header("x-request-id", "x".repeat(200))
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_request_id");
    fleet.stop().await.unwrap();
}

/// Redis away, the idempotency record cannot hold a retry back (it fails open, as when a 503
/// released the key): the key itself names the run, so the retry makes no second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotency_key_names_the_run_even_when_its_record_cannot_be_read() {
    let model = model("once").await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&model.uri());
    let redis = env.behind_proxy(hermes_testkit::Server::Redis).await;
    let fleet = env.start(&Service::ALL).await;
    redis.set_down(true);
    let send = || {
        reqwest::Client::new()
            .post(fleet.url("/v1/chat/completions"))
            .bearer_auth(KEY)
            .header("idempotency-key", "order-9")
            .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 200);
    let again = send().await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(
        again.headers()["x-hermes-run-id"],
        first.headers()["x-hermes-run-id"]
    );
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "once");
    assert_eq!(model.received_requests().await.unwrap().len(), 1);
    redis.set_down(false);
    fleet.stop().await.unwrap();
}
