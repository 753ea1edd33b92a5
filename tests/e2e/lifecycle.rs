//! The real binary: graceful shutdown with a message in flight, and `doctor`.

use std::time::Duration;

use hermes_testkit::{KEY, TestEnv, eventually, free_port, openai_answer};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_message_in_flight_first() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_millis(2500))
                .set_body_json(openai_answer("slow but sure", 1, 3)),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri());
    let mut all = env.spawn_ready("all").await;
    let url = all.url("/v1/chat/completions");
    let ready = all.readyz();

    let request = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .bearer_auth(KEY)
            .json(&json!({"messages": [{"role": "user", "content": "take your time"}]}))
            .send()
            .await
    });
    // Let the message reach the (slow) provider, then ask the process to stop.
    eventually(Duration::from_secs(15), "the model call", || async {
        (!provider.received_requests().await?.is_empty()).then_some(())
    })
    .await;
    assert_eq!(
        provider.received_requests().await.unwrap().len(),
        1,
        "the model call is in flight"
    );
    all.terminate();
    // Readiness goes off at once so no new traffic is routed here (or the server is gone).
    eventually(Duration::from_secs(2), "readiness off", || async {
        match reqwest::get(&ready).await {
            Ok(r) => (r.status() == 503).then_some(()),
            Err(_) => Some(()),
        }
    })
    .await;

    let resp = request
        .await
        .unwrap()
        .expect("the in-flight request is answered");
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "slow but sure");
    let status = tokio::time::timeout(Duration::from_secs(20), all.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "clean exit after SIGTERM, got {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_an_unreachable_rabbitmq_and_fails() {
    let mut env = TestEnv::new().await;
    env.set(
        "AMQP_URL",
        &format!("amqp://guest:secretpw@127.0.0.1:{}/%2f", free_port()),
    );
    let out = env.command().arg("doctor").output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("[FAIL] RabbitMQ"), "{stdout}");
    assert!(stdout.contains("1 check(s) failed: RabbitMQ"), "{stdout}");
    assert!(stdout.contains("[ ok ] PostgreSQL"), "{stdout}");
    assert!(
        !stdout.contains("secretpw") && !stdout.contains(KEY),
        "secrets must not print: {stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_refuses_to_run_on_an_older_schema() {
    let env = TestEnv::new().await;
    env.db()
        .get()
        .await
        .unwrap()
        .batch_execute("DELETE FROM schema_migrations")
        .await
        .unwrap();
    let result = hermes::run(
        env.config(),
        &[hermes::Service::Router],
        hermes::Listeners::default(),
        std::future::pending(),
    )
    .await;
    let err = format!("{:#}", result.unwrap_err());
    assert!(
        err.contains("schema is at version 0") && err.contains("hermes migrate"),
        "{err}"
    );
}

/// A service whose broker stays unreachable past `HERMES_BUS_RECONNECT_SECS` exits non-zero,
/// with callers still knocking, so that its orchestrator restarts it: the fault harness relies
/// on it to bring a fleet back after a 60 s RabbitMQ outage (docs/faults.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_cut_off_from_the_broker_past_its_bound_exits() {
    let mut env = TestEnv::new().await;
    let broker = env.behind_proxy(hermes_testkit::Server::Broker).await;
    env.set("HERMES_BUS_RECONNECT_SECS", "2");
    let mut ingest = env.spawn_ready("ingest").await;
    // Callers retrying while the broker is away, as platforms do.
    let url = ingest.url("/v1/chat/completions");
    let callers = tokio::spawn(async move {
        let client = reqwest::Client::new();
        loop {
            let _ = client
                .post(&url)
                .bearer_auth(KEY)
                .json(&json!({"messages": [{"role": "user", "content": "anyone?"}]}))
                .send()
                .await;
        }
    });
    broker.set_down(true);
    let status = tokio::time::timeout(Duration::from_secs(60), ingest.child.wait())
        .await
        .expect("the process exits within its bound, not hangs")
        .unwrap();
    callers.abort();
    assert!(!status.success(), "a non-zero exit, got {status}");
}

/// A broker that accepts connections and then never answers (a hung broker, a black-holed
/// route) must not hold a service's reconnect past its bound either: each attempt is bounded
/// by what is left of `HERMES_BUS_RECONNECT_SECS`, and the service exits non-zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_whose_broker_stops_answering_exits_past_its_bound() {
    let mut env = TestEnv::new().await;
    let broker = env.behind_proxy(hermes_testkit::Server::Broker).await;
    env.set("HERMES_BUS_RECONNECT_SECS", "2");
    let mut ingest = env.spawn_ready("ingest").await;
    // New connections get through the proxy but not a byte more; the old ones are cut.
    broker.set_stalled(true);
    broker.cut();
    let status = tokio::time::timeout(Duration::from_secs(60), ingest.child.wait())
        .await
        .expect("the process exits within its bound, not hangs")
        .unwrap();
    assert!(!status.success(), "a non-zero exit, got {status}");
}
