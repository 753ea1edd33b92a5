//! What run event streams cost Redis (docs/architecture.md#10-redis): a chat run nobody follows
//! writes no stream at all, one followed with `GET /v1/runs/{id}/events` does from then on,
//! and every stream is bounded in bytes: past the bound deltas are dropped and a final event
//! that does not fit points to the run's row, while callers still get the whole answer.

use std::time::Duration;

use hermes::Service;
use hermes_cache::Cache;
use hermes_cache::run_events::{Appended, RunEvent, RunEvents};

use hermes_telemetry::Metrics;
use hermes_testkit::{KEY, TestEnv, answered, eventually, metric};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{Outcome, Platform, Reply, ReplyTo, Usage};
use redis::AsyncCommands;
use serde_json::{Value, json};

const TG_TOKEN: &str = "123456:run-streams-token";

/// A routed Telegram run of chat `chat`, as the router leaves it.
async fn telegram_run(env: &TestEnv, chat: &str) -> RunId {
    let db = env.db();
    let mut client = db.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let run = hermes_testkit::routed_run(&tx, Platform::Telegram, chat).await;
    tx.commit().await.unwrap();
    run
}

/// The answer `text` to Telegram chat `chat`, as the llm stage hands it to delivery.
fn answer(chat: &str, text: &str) -> Reply {
    answered(ReplyTo::chat(Platform::Telegram, chat), text)
}

async fn redis(env: &TestEnv) -> redis::aio::MultiplexedConnection {
    redis::Client::open(env.vars["REDIS_URL"].as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The keys of this test's run event streams.
async fn streams(env: &TestEnv) -> Vec<String> {
    let mut conn = redis(env).await;
    let mut iter = conn
        .scan_match::<_, String>(format!("{}:run:*:events", env.ns))
        .await
        .unwrap();
    let mut keys = Vec::new();
    while let Some(k) = futures_util::StreamExt::next(&mut iter).await {
        keys.push(k.unwrap());
    }
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_run_nobody_follows_writes_no_stream_and_a_followed_one_does() {
    let api = hermes_testkit::telegram_fake(TG_TOKEN).await;
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .set("TELEGRAM_API_BASE_URL", &api.uri());
    let (quiet, followed) = (
        telegram_run(&env, "6101").await,
        telegram_run(&env, "6102").await,
    );
    let fleet = env.start(&[Service::Ingest, Service::Delivery]).await;
    let bus = env.bus().await;
    let db = env.db();
    let closed = |run: RunId| {
        let db = db.clone();
        async move {
            let c = db.get().await.ok()?;
            let status: String = c
                .query_one(
                    "SELECT status FROM agent_runs WHERE id = $1",
                    &[&run.as_uuid()],
                )
                .await
                .ok()?
                .get(0);
            (status == "completed").then_some(())
        }
    };

    // Nobody follows the first run: its answer reaches the chat, and Redis keeps no stream.
    bus.publish(&Envelope::new(quiet, None, &answer("6101", "first answer")))
        .await
        .unwrap();
    eventually(Duration::from_secs(30), "the first run closed", || {
        closed(quiet)
    })
    .await;
    let m = fleet.metrics().await;
    assert_eq!(
        metric(
            &m,
            "hermes_run_events_total{outcome=\"unread\",platform=\"telegram\"}"
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        metric(&m, "hermes_run_event_bytes_total{platform=\"telegram\"}"),
        None,
        "no byte written for a chat run"
    );
    assert_eq!(streams(&env).await, Vec::<String>::new());

    // The operator follows the second run: its final event is written to its stream and
    // reaches the follower from there (with an entry id; one from the row has none).
    let mut resp = reqwest::Client::new()
        .get(fleet.url(&format!("/v1/runs/{followed}/events")))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let marker = format!("{}:run:{followed}:followed", env.ns);
    let mut conn = redis(&env).await;
    eventually(Duration::from_secs(10), "the run marked followed", || {
        let (mut conn, marker) = (conn.clone(), marker.clone());
        async move { conn.exists::<_, bool>(&marker).await.ok()?.then_some(()) }
    })
    .await;
    bus.publish(&Envelope::new(
        followed,
        None,
        &answer("6102", "second answer"),
    ))
    .await
    .unwrap();
    let mut body = String::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = resp.chunk().await.unwrap() {
            body.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await
    .expect("the stream ends after the final event");
    assert!(body.contains("event: run.completed"), "{body}");
    assert!(body.contains("second answer"), "{body}");
    let completed = body
        .split("\n\n")
        .find(|e| e.contains("event: run.completed"))
        .unwrap();
    assert!(completed.contains("id: "), "from the stream: {body}");
    assert_eq!(streams(&env).await.len(), 1);
    let _: () = conn.del(&marker).await.unwrap();
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_keep_to_readers_and_to_the_byte_bound() {
    let env = TestEnv::new().await;
    let config = env.config();
    let cache = Cache::new(&config.redis_url, config.namespace.clone(), Metrics::new()).unwrap();
    let events = RunEvents::with_bounds(cache, Duration::from_secs(60), 400);
    let delta = |text: &str| RunEvent::Delta {
        text: text.into(),
        round: 0,
        attempt: None,
    };

    // A WhatsApp run: nothing stored until someone follows it.
    let chat = RunId::new();
    assert_eq!(
        events
            .append(chat, Platform::Whatsapp, &delta("hi"))
            .await
            .unwrap(),
        Appended::Unread
    );
    assert_eq!(streams(&env).await, Vec::<String>::new());
    events.follow(chat).await.unwrap();
    assert!(matches!(
        events
            .append(chat, Platform::Whatsapp, &delta("hi"))
            .await
            .unwrap(),
        Appended::Written(_)
    ));

    // An API run: written up to the bound, then deltas are dropped and a final event that
    // does not fit is written as a pointer to the row.
    let api = RunId::new();
    let mut written = 0;
    loop {
        match events
            .append(api, Platform::Api, &delta(&"x".repeat(50)))
            .await
            .unwrap()
        {
            Appended::Written(_) => written += 1,
            Appended::Full => break,
            other => panic!("unexpected {other:?}"),
        }
        assert!(written < 100, "the bound holds");
    }
    assert!(written >= 3, "{written}");
    let last = RunEvent::Final {
        outcome: Outcome::Answered {
            text: "y".repeat(1000),
            model: "mock".into(),
            usage: Usage::default(),
            finish_reason: "stop".into(),
            tools_used: Vec::new(),
            transcript: Vec::new(),
        },
    };
    assert!(matches!(
        events.append(api, Platform::Api, &last).await.unwrap(),
        Appended::ByReference(_)
    ));
    let read = events.read_after(api, "0").await.unwrap();
    assert_eq!(read.len(), written + 1);
    assert_eq!(read.last().unwrap().1, RunEvent::Closed);
    let stored: usize = read
        .iter()
        .map(|(_, e)| serde_json::to_string(e).unwrap().len())
        .sum();
    let pointer = serde_json::to_string(&RunEvent::Closed).unwrap().len();
    assert!(stored <= 400 + pointer, "{stored} bytes stored");

    // A final event that fits is written whole.
    let small = RunId::new();
    let fits = RunEvent::Final {
        outcome: Outcome::Failed {
            code: hermes_types::model::FailureCode::Cancelled,
            message: "stopped".into(),
        },
    };
    assert!(matches!(
        events.append(small, Platform::Rest, &fits).await.unwrap(),
        Appended::Written(_)
    ));
    assert_eq!(events.read_after(small, "0").await.unwrap()[0].1, fits);
}

/// Chat completions with a bound smaller than their answer: the deltas stop at the bound,
/// the final event points to the row, and both callers still get the whole text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_get_the_whole_answer_when_it_outgrows_the_streams_bound() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_RUN_EVENTS_MAX_BYTES", "300");
    let fleet = env.start(&Service::ALL).await;
    let words: Vec<String> = (0..60).map(|i| format!("word{i}")).collect();
    let question = words.join(" ");
    let expected = format!("echo: {question}");

    let resp = fleet.chat(&question).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], expected.as_str());

    let mut resp = fleet
        .post_chat(&json!({
            "model": "hermes",
            "messages": [{"role": "user", "content": question}],
            "stream": true,
        }))
        .await;
    assert_eq!(resp.status(), 200);
    let run = resp.headers()["x-hermes-run-id"]
        .to_str()
        .unwrap()
        .to_string();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(bytes) = resp.chunk().await.unwrap() {
            raw.extend_from_slice(&bytes);
        }
    })
    .await
    .expect("the stream ends");
    let raw = String::from_utf8(raw).unwrap();
    let content: String = raw
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(content, expected, "{raw}");

    let m = fleet.metrics().await;
    let count = |outcome: &str| {
        metric(
            &m,
            &format!("hermes_run_events_total{{outcome=\"{outcome}\",platform=\"api\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert!(count("full") >= 1.0, "deltas dropped at the bound: {m}");
    assert_eq!(count("final_by_reference"), 2.0, "{m}");
    let mut conn = redis(&env).await;
    let entries: Vec<redis::Value> = redis::cmd("XRANGE")
        .arg(format!("{}:run:{run}:events", env.ns))
        .arg("-")
        .arg("+")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!entries.is_empty());
    fleet.stop().await.unwrap();
}
