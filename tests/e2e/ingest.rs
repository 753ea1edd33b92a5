//! Ingest refuses what it must refuse, with JSON errors, and publishes nothing for it.

use hermes::Service;
use hermes_testkit::{KEY, TestEnv};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_keys_and_bad_bodies_are_refused_and_nothing_is_published() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_MAX_BODY_BYTES", "4096");
    // Ingest alone: whatever it published would stay in the router queue.
    let fleet = env.start(&[Service::Ingest]).await;
    let http = reqwest::Client::new();
    let url = fleet.url("/v1/chat/completions");
    let good = r#"{"messages":[{"role":"user","content":"hi"}]}"#;

    for auth in [None, Some("Bearer wrong-key-0123456789"), Some(KEY)] {
        let mut req = http
            .post(&url)
            .header("content-type", "application/json")
            .body(good);
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 401, "auth {auth:?}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_api_key");
        assert_eq!(body["error"]["type"], "authentication_error");
    }

    let resp = http
        .post(&url)
        .bearer_auth(KEY)
        .body("{\"messages\": [")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json");

    let resp = http
        .post(&url)
        .bearer_auth(KEY)
        .body(r#"{"messages":[]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);

    let huge = format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(10_000)
    );
    let resp = http
        .post(&url)
        .bearer_auth(KEY)
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "body_too_large");

    let resp = http.get(fleet.url("/nope")).send().await.unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
    assert_eq!(resp.headers()["referrer-policy"], "no-referrer");

    let bus = env.bus().await;
    let (messages, _) = bus
        .queue_stats(&bus.names().queue(hermes_bus::Stage::Router))
        .await
        .unwrap();
    assert_eq!(messages, 0, "refused requests must publish nothing");
    bus.close().await;

    let metrics = fleet.metrics().await;
    assert!(
        metrics
            .contains("hermes_ingest_messages_total{outcome=\"invalid_json\",platform=\"api\"} 1"),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_models_answer() {
    let env = TestEnv::new().await;
    let fleet = env.start(&[Service::Ingest]).await;
    let h: Value = reqwest::get(fleet.url("/health"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(h["status"], "ok");
    let models: Value = reqwest::Client::new()
        .get(fleet.url("/v1/models"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "hermes");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_its_in_flight_bound_ingest_sheds_with_503() {
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(std::time::Duration::from_millis(1500))
                .set_body_json(hermes_testkit::openai_answer("slow", 1, 1)),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_MAX_IN_FLIGHT", "1")
        .openai_mock(&provider.uri());
    let fleet = std::sync::Arc::new(env.start(&Service::ALL).await);
    let first = {
        let fleet = fleet.clone();
        tokio::spawn(async move { fleet.chat("hold the only slot").await.status() })
    };
    // The first request holds the slot while its (slow) model call is in flight.
    hermes_testkit::eventually(
        std::time::Duration::from_secs(20),
        "the first model call in flight",
        || async { (!provider.received_requests().await?.is_empty()).then_some(()) },
    )
    .await;
    let shed = fleet.chat("one too many").await;
    assert_eq!(shed.status(), 503);
    assert!(shed.headers().contains_key("retry-after"));
    // Health checks are never shed.
    assert_eq!(
        reqwest::get(fleet.url("/health")).await.unwrap().status(),
        200
    );
    assert_eq!(first.await.unwrap(), 200);
    let fleet = std::sync::Arc::try_unwrap(fleet).ok().expect("only owner");
    fleet.stop().await.unwrap();
}

/// A run that ended in PostgreSQL while its final event never reached Redis (a lost append,
/// a Redis restart) is still answered: the waiter reads the run row, not only the stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_gets_the_answer_of_a_run_whose_final_event_never_reached_redis() {
    let (status, body) = answered_from_the_row(false).await;
    assert_eq!(status, 200);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "answered from the row"
    );
}

/// The same for a streamed caller: the stream ends with the row's answer, not a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_caller_gets_the_answer_of_a_run_whose_final_event_never_reached_redis() {
    let (status, body) = answered_from_the_row(true).await;
    assert_eq!(status, 200);
    assert!(body.contains("answered from the row"), "{body}");
    assert!(!body.contains("run_timeout"), "{body}");
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
}

/// Ingest alone takes a chat completion; the test then closes the run in PostgreSQL as the
/// stages would, without the Redis append. The caller's status and body.
async fn answered_from_the_row(stream: bool) -> (u16, String) {
    use hermes_bus::Stage;
    use hermes_db::runs::{self, NewRun};
    use hermes_testkit::{drain, eventually};
    use hermes_types::model::{FinishReason, Outcome, Platform, Tier, Usage};
    use std::time::Duration;

    let mut env = TestEnv::new().await;
    // Long enough that only the row can answer before the caller would be told it timed out.
    env.set("HERMES_RUN_TIMEOUT_SECS", "60");
    // Ingest alone: no stage will ever append the run's final event.
    let fleet = env.start(&[Service::Ingest]).await;
    let url = fleet.url("/v1/chat/completions");
    let request =
        serde_json::json!({"messages": [{"role": "user", "content": "hi"}], "stream": stream});
    let caller = tokio::spawn(async move {
        let resp = reqwest::Client::new()
            .post(url)
            .bearer_auth(KEY)
            .json(&request)
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    });
    let bus = env.bus().await;
    let accepted = eventually(Duration::from_secs(30), "the message published", || async {
        drain(&bus, Stage::Router).await.into_iter().next()
    })
    .await;
    // What the stages would have written to PostgreSQL, without the Redis append.
    let db = env.db();
    let mut client = db.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let new = NewRun {
        id: accepted.run_id,
        platform: Platform::Api,
        sender_id: "api",
        chat_id: "api",
        external_message_id: None,
        tier: Tier::Free,
        input_text: Some("hi"),
        metadata: None,
        api_key_id: None,
        traceparent: None,
    };
    assert!(runs::create(&tx, &new).await.unwrap());
    let outcome = Outcome::Answered {
        text: "answered from the row".into(),
        model: "mock".into(),
        usage: Usage::default(),
        finish_reason: FinishReason::Stop,
        tools_used: Vec::new(),
        transcript: Vec::new(),
    };
    assert!(
        runs::close::with_outcome(&tx, accepted.run_id, &outcome, None, &[])
            .await
            .unwrap()
            .closed
    );
    tx.commit().await.unwrap();
    let answer = caller.await.unwrap();
    bus.close().await;
    fleet.stop().await.unwrap();
    answer
}
