//! `Idempotency-Key` on the API's POSTs: a repeat is answered from the first request's
//! answer (one run, one model call), from any replica; another body with the same key is a
//! conflict; a repeat sent while the first runs waits for it; a first request refused before
//! it was accepted leaves the key free; the records are PostgreSQL's, so Redis evicting or
//! losing its keys lets nothing run twice.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use hermes::Service;
use hermes_testkit::{TestEnv, eventually, metric};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn chat(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

async fn runs(env: &TestEnv) -> i64 {
    hermes_testkit::count(&env.db(), "SELECT count(*) FROM agent_runs", &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeat_is_the_first_answer_and_another_body_is_a_conflict() {
    let provider = hermes_testkit::openai_fake("once").await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri());
    let fleet = env.start(&Service::ALL).await;

    let first = fleet
        .post_idempotent("/v1/chat/completions", "order-1", &chat("hi"))
        .await;
    assert_eq!(first.status(), 200);
    assert!(!first.headers().contains_key("idempotency-replayed"));
    let run = first.headers()["x-hermes-run-id"].clone();
    let first: Value = first.json().await.unwrap();

    let again = fleet
        .post_idempotent("/v1/chat/completions", "order-1", &chat("hi"))
        .await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    assert_eq!(again.headers()["x-hermes-run-id"], run);
    assert_eq!(again.headers()["content-type"], "application/json");
    let again: Value = again.json().await.unwrap();
    assert_eq!(
        again, first,
        "the replay is the first answer, byte for byte"
    );
    assert_eq!(provider.received_requests().await.unwrap().len(), 1);
    assert_eq!(runs(&env).await, 1);

    let other = fleet
        .post_idempotent("/v1/chat/completions", "order-1", &chat("bye"))
        .await;
    assert_eq!(other.status(), 409);
    let e: Value = other.json().await.unwrap();
    assert_eq!(e["error"]["code"], "idempotency_key_conflict");

    // The same key on another route is another request too.
    let rest = fleet
        .post_idempotent(
            "/v1/messages",
            "order-1",
            &json!({"sender_id": "s", "text": "hi"}),
        )
        .await;
    assert_eq!(rest.status(), 409);

    // Keys are checked; a request without one is not affected.
    let bad = fleet
        .post_idempotent("/v1/chat/completions", &"k".repeat(256), &chat("hi"))
        .await;
    assert_eq!(bad.status(), 400);
    let e: Value = bad.json().await.unwrap();
    assert_eq!(e["error"]["code"], "invalid_idempotency_key");
    assert_eq!(fleet.chat("no key").await.status(), 200);

    let metrics = fleet.metrics().await;
    assert_eq!(
        metric(&metrics, "hermes_idempotency_total{outcome=\"replayed\"}"),
        Some(1.0)
    );
    assert_eq!(
        metric(&metrics, "hermes_idempotency_total{outcome=\"conflict\"}"),
        Some(2.0)
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_first_request_leaves_the_key_free_and_a_stream_replays_as_its_run() {
    let env = TestEnv::new().await;
    let fleet = env.start(&Service::ALL).await;
    // Refused before anything was accepted: the key is released...
    let refused = fleet
        .post_idempotent("/v1/chat/completions", "k-2", &json!({"messages": []}))
        .await;
    assert_eq!(refused.status(), 400);
    // ...so the corrected request with the same key runs instead of being a conflict.
    let streamed = fleet
        .post_idempotent(
            "/v1/chat/completions",
            "k-2",
            &json!({"messages": [{"role": "user", "content": "stream me"}], "stream": true}),
        )
        .await;
    assert_eq!(streamed.status(), 200);
    let run = streamed.headers()["x-hermes-run-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body = streamed.text().await.unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");

    let replay = fleet
        .post_idempotent(
            "/v1/chat/completions",
            "k-2",
            &json!({"messages": [{"role": "user", "content": "stream me"}], "stream": true}),
        )
        .await;
    assert_eq!(replay.status(), 200);
    assert_eq!(replay.headers()["idempotency-replayed"], "true");
    let replay: Value = replay.json().await.unwrap();
    assert_eq!(
        replay,
        json!({"object": "hermes.replayed_stream", "run_id": run})
    );
    assert_eq!(runs(&env).await, 1);
    fleet.stop().await.unwrap();
}

/// A fake model whose answers wait until the test opens the gate (bounded, so a broken
/// test fails instead of hanging). It counts its calls itself: wiremock's own record is
/// locked while a response is being made.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>, Arc<AtomicUsize>);

impl Gate {
    fn open(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_all();
    }

    fn calls(&self) -> usize {
        self.1.load(Ordering::SeqCst)
    }
}

impl Respond for Gate {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        self.1.fetch_add(1, Ordering::SeqCst);
        let (open, cv) = &*self.0;
        let guard = open.lock().unwrap();
        let (guard, _) = cv
            .wait_timeout_while(guard, Duration::from_secs(30), |open| !*open)
            .unwrap();
        assert!(*guard, "the gate was never opened");
        ResponseTemplate::new(200).set_body_json(hermes_testkit::openai_answer("together", 1, 1))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_on_two_replicas_make_one_run() {
    let provider = MockServer::start().await;
    let gate = Gate::default();
    Mock::given(method("POST"))
        .respond_with(gate.clone())
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri());
    let fleet = Arc::new(env.start(&Service::ALL).await);
    // A second ingest replica on the same namespace.
    let second = Arc::new(env.start(&[Service::Ingest]).await);

    let first = {
        let fleet = fleet.clone();
        tokio::spawn(async move {
            fleet
                .post_idempotent("/v1/chat/completions", "same", &chat("hi"))
                .await
        })
    };
    // The first request's model call is in flight (and held): it holds the key.
    eventually(Duration::from_secs(20), "the model called", || async {
        (gate.calls() == 1).then_some(())
    })
    .await;
    let duplicate = {
        let second = second.clone();
        tokio::spawn(async move {
            second
                .post_idempotent("/v1/chat/completions", "same", &chat("hi"))
                .await
        })
    };
    // The duplicate, on the other replica, waits for the first's answer.
    eventually(Duration::from_secs(20), "the duplicate waiting", || async {
        let m = second.metrics().await;
        (metric(&m, "hermes_idempotency_waiting") == Some(1.0)).then_some(())
    })
    .await;
    gate.open();

    let first = first.await.unwrap();
    assert_eq!(first.status(), 200);
    assert!(!first.headers().contains_key("idempotency-replayed"));
    let run = first.headers()["x-hermes-run-id"].clone();
    let first: Value = first.json().await.unwrap();
    let duplicate = duplicate.await.unwrap();
    assert_eq!(duplicate.status(), 200);
    assert_eq!(duplicate.headers()["idempotency-replayed"], "true");
    assert_eq!(duplicate.headers()["x-hermes-run-id"], run);
    let duplicate: Value = duplicate.json().await.unwrap();
    assert_eq!(duplicate, first);
    assert_eq!(first["choices"][0]["message"]["content"], "together");
    assert_eq!(gate.calls(), 1);
    assert_eq!(runs(&env).await, 1);

    // Later repeats on either replica are replays too.
    let later = second
        .post_idempotent("/v1/chat/completions", "same", &chat("hi"))
        .await;
    assert_eq!(later.headers()["idempotency-replayed"], "true");
    let m = second.metrics().await;
    assert_eq!(
        metric(&m, "hermes_idempotency_total{outcome=\"waited\"}"),
        Some(1.0)
    );
    assert_eq!(metric(&m, "hermes_idempotency_waiting"), Some(0.0));

    let second = Arc::try_unwrap(second).ok().expect("only owner");
    second.stop().await.unwrap();
    let fleet = Arc::try_unwrap(fleet).ok().expect("only owner");
    fleet.stop().await.unwrap();
}

/// The records live in PostgreSQL: Redis evicting every key of the install (memory pressure
/// under `volatile-lru`, or a restart), or being away, does not let a repeat run again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_survive_redis_losing_every_key_and_being_away() {
    let mut env = TestEnv::new().await;
    let redis = env.behind_proxy(hermes_testkit::Server::Redis).await;
    // Ingest alone: the message is accepted (queued) whatever happens to it next.
    let fleet = env.start(&[Service::Ingest]).await;
    let body = json!({"sender_id": "s-1", "text": "hi"});
    let first = fleet
        .post_idempotent("/v1/messages", "k-evicted", &body)
        .await;
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    assert!(first["run_id"].is_string(), "{first}");

    // Evicted: every key of this install's namespace is gone from Redis.
    let mut conn = redis::Client::open(env.vars["REDIS_URL"].as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:*", env.ns))
        .query_async(&mut conn)
        .await
        .unwrap();
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL")
            .arg(&keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let again = fleet
        .post_idempotent("/v1/messages", "k-evicted", &body)
        .await;
    assert_eq!(again.status(), 202);
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    // The same answer, the same run.
    assert_eq!(again.json::<Value>().await.unwrap(), first);

    // Away: still replayed, and a new key is still kept.
    redis.set_down(true);
    let again = fleet
        .post_idempotent("/v1/messages", "k-evicted", &body)
        .await;
    assert_eq!(again.headers()["idempotency-replayed"], "true");
    let other = json!({"sender_id": "s-1", "text": "another"});
    let fresh = fleet
        .post_idempotent("/v1/messages", "k-away", &other)
        .await;
    assert_eq!(fresh.status(), 202);
    assert!(!fresh.headers().contains_key("idempotency-replayed"));
    let repeat = fleet
        .post_idempotent("/v1/messages", "k-away", &other)
        .await;
    assert_eq!(repeat.headers()["idempotency-replayed"], "true");
    let m = fleet.metrics().await;
    assert_eq!(
        metric(&m, "hermes_idempotency_total{outcome=\"unavailable\"}").unwrap_or(0.0),
        0.0
    );
    assert_eq!(
        metric(&m, "hermes_idempotency_total{outcome=\"replayed\"}"),
        Some(3.0)
    );
    redis.set_down(false);
    fleet.stop().await.unwrap();
}

/// A caller that hangs up while its run goes on, then retries with the same key, gets the
/// run's answer: the first request's answer is kept although nobody was there to read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_hangs_up_and_retries_gets_the_first_runs_answer() {
    let provider = MockServer::start().await;
    let gate = Gate::default();
    Mock::given(method("POST"))
        .respond_with(gate.clone())
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri());
    let fleet = Arc::new(env.start(&Service::ALL).await);
    let gone = {
        let fleet = fleet.clone();
        tokio::spawn(async move {
            fleet
                .post_idempotent("/v1/chat/completions", "hang-up", &chat("hi"))
                .await
        })
    };
    eventually(Duration::from_secs(20), "the model called", || async {
        (gate.calls() == 1).then_some(())
    })
    .await;
    // The caller hangs up: its connection is dropped mid-request.
    gone.abort();
    assert!(gone.await.unwrap_err().is_cancelled());
    let retry = {
        let fleet = fleet.clone();
        tokio::spawn(async move {
            fleet
                .post_idempotent("/v1/chat/completions", "hang-up", &chat("hi"))
                .await
        })
    };
    eventually(Duration::from_secs(20), "the retry waiting", || async {
        let m = fleet.metrics().await;
        (metric(&m, "hermes_idempotency_waiting") == Some(1.0)).then_some(())
    })
    .await;
    gate.open();
    let retry = retry.await.unwrap();
    assert_eq!(retry.status(), 200);
    assert_eq!(retry.headers()["idempotency-replayed"], "true");
    let answer: Value = retry.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "together");
    assert_eq!(gate.calls(), 1);
    assert_eq!(runs(&env).await, 1);
    let fleet = Arc::try_unwrap(fleet).ok().expect("only owner");
    fleet.stop().await.unwrap();
}
