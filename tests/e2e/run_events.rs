//! A run's events through the whole fleet (docs/api.md, run events): lifecycle, tool start
//! and finish, token deltas, in order; a client that drops its stream half-way and comes
//! back to another ingest with `Last-Event-ID` gets the rest exactly once; a stop ends a run
//! in the middle of its tool round with no further model call; a streamed chat completion
//! tells of its tools with named `hermes.tool.progress` events, and one stopped by its run id
//! ends with the `cancelled` error.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{KEY, TestEnv};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::runs::{provider_asking_for, provider_calls, run_in, start_run};

/// One server-sent event as received.
#[derive(Clone, Debug, PartialEq)]
struct Sse {
    id: Option<String>,
    event: Option<String>,
    data: String,
}

impl Sse {
    fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }
}

/// The complete events in `buf` (comments skipped), leaving an unfinished one in it.
fn take_events(buf: &mut String) -> Vec<Sse> {
    let mut out = Vec::new();
    while let Some(end) = buf.find("\n\n") {
        let block: String = buf.drain(..end + 2).collect();
        let mut sse = Sse {
            id: None,
            event: None,
            data: String::new(),
        };
        let mut has_data = false;
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                sse.id = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("event: ") {
                sse.event = Some(v.to_string());
            } else if let Some(v) = line.strip_prefix("data: ") {
                sse.data.push_str(v);
                has_data = true;
            }
        }
        if has_data {
            out.push(sse);
        }
    }
    out
}

/// Open `run`'s events on `fleet`, resuming after `last_event_id` when given.
async fn open(
    fleet: &hermes_testkit::Fleet,
    run: &str,
    last_event_id: Option<&str>,
) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .get(fleet.url(&format!("/v1/runs/{run}/events")))
        .bearer_auth(KEY);
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let resp = req.send().await.expect("ingest answers");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    resp
}

/// Read events until `enough` holds of what was read (then the connection is dropped) or
/// the stream ends; whether it ended.
async fn read(mut resp: reqwest::Response, enough: impl Fn(&[Sse]) -> bool) -> (Vec<Sse>, bool) {
    let mut buf = String::new();
    let mut events = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match resp.chunk().await.expect("the stream reads") {
                Some(bytes) => {
                    buf.push_str(std::str::from_utf8(&bytes).expect("SSE is text"));
                    events.extend(take_events(&mut buf));
                    if enough(&events) {
                        return false;
                    }
                }
                None => return true,
            }
        }
    })
    .await
    .map(|ended| (events, ended))
    .expect("the events arrive")
}

fn names(events: &[Sse]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e.event.as_deref().unwrap_or(""))
        .collect()
}

/// `<ms>-<seq>` as a pair, to check ids grow.
fn entry(id: &str) -> (u64, u64) {
    let (a, b) = id.split_once('-').expect("a stream entry id");
    (a.parse().unwrap(), b.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_resume_on_another_ingest_exactly_once_and_chat_streams_tell_of_tools() {
    let provider = provider_asking_for(
        "current_time",
        json!({"timezone": "UTC"}),
        &["The ", "time ", "is ", "noon."],
    )
    .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test");
    let a = env.start(&Service::ALL).await;
    let b = env.start(&[Service::Ingest]).await;
    let run = start_run(
        &a,
        KEY,
        json!({"input": "what time is it?", "session_id": "s-1"}),
    )
    .await;

    // Half the run from ingest A: up to the end of the tool call. Then the client is gone.
    let (first, ended) = read(open(&a, &run, None).await, |events| {
        events
            .iter()
            .any(|e| e.event.as_deref() == Some("tool.completed"))
    })
    .await;
    assert!(!ended, "{first:?}");
    let last_seen = first
        .last()
        .unwrap()
        .id
        .clone()
        .expect("every event has an id");

    // Back, on ingest B, from the last event seen.
    let (rest, ended) = read(open(&b, &run, Some(&last_seen)).await, |_| false).await;
    assert!(ended, "the stream ends after the final event");
    // The whole stream, read again from the start once the run is over.
    let (full, _) = read(open(&b, &run, None).await, |_| false).await;
    let resumed: Vec<Sse> = first.iter().chain(rest.iter()).cloned().collect();
    assert_eq!(resumed, full, "nothing twice, nothing missing");

    assert_eq!(
        names(&full),
        [
            "run.queued",
            "run.running",
            "tool.started",
            "tool.completed",
            "run.running",
            "message.delta",
            "message.delta",
            "message.delta",
            "message.delta",
            "run.completed"
        ],
        "{full:?}"
    );
    let ids: Vec<(u64, u64)> = full
        .iter()
        .map(|e| entry(e.id.as_deref().unwrap()))
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids grow: {ids:?}");
    assert_eq!(full[0].json()["session_id"], "s-1");
    let started = full[2].json();
    assert_eq!(started["name"], "current_time");
    assert_eq!(started["call_id"], "call_1");
    assert_eq!(started["arguments"], json!({"timezone": "UTC"}));
    let finished = full[3].json();
    assert_eq!(finished["ok"], true, "{finished}");
    assert!(
        finished["output"].as_str().unwrap().contains("UTC"),
        "{finished}"
    );
    assert_eq!(full[4].json()["round"], 1);
    let text: String = full[5..9]
        .iter()
        .map(|e| e.json()["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "The time is noon.");
    let done = full[9].json();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"], "The time is noon.");
    assert_eq!(
        done["usage"],
        json!({"input_tokens": 70, "output_tokens": 12, "total_tokens": 82})
    );
    let polled = run_in(&b, &run, "completed").await;
    assert_eq!(polled["usage"]["total_tokens"], 82);
    assert_eq!(polled["session_id"], "s-1");

    // Resuming after the final event: nothing more will come, and 204 says so.
    let resp = reqwest::Client::new()
        .get(b.url(&format!("/v1/runs/{run}/events")))
        .bearer_auth(KEY)
        .header("last-event-id", full[9].id.as_deref().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    // A resume id that is not a stream entry id is refused.
    let resp = reqwest::Client::new()
        .get(b.url(&format!("/v1/runs/{run}/events")))
        .bearer_auth(KEY)
        .header("last-event-id", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);

    // A streamed chat completion with the same tool round: the tool's start and end come as
    // named events, and every unnamed `data:` is a completion chunk.
    let resp = a
        .post_chat(
            &json!({"messages": [{"role": "user", "content": "what time is it?"}], "stream": true}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let (events, ended) = read(resp, |_| false).await;
    assert!(ended);
    // Each is a chunk with no choices (the SDKs yield named events' data as chunks), with the
    // tool's progress beside.
    let progress: Vec<Value> = events
        .iter()
        .filter(|e| e.event.as_deref() == Some("hermes.tool.progress"))
        .map(Sse::json)
        .inspect(|p| {
            assert_eq!(p["object"], "chat.completion.chunk");
            assert_eq!(p["choices"], json!([]));
        })
        .map(|p| json!({"tool": p["tool"], "call_id": p["call_id"], "status": p["status"]}))
        .collect();
    assert_eq!(
        progress,
        [
            json!({"tool": "current_time", "call_id": "call_1", "status": "started"}),
            json!({"tool": "current_time", "call_id": "call_1", "status": "completed"}),
        ]
    );
    let chunks: Vec<&Sse> = events.iter().filter(|e| e.event.is_none()).collect();
    assert_eq!(chunks.last().unwrap().data, "[DONE]");
    for c in &chunks[..chunks.len() - 1] {
        assert_eq!(c.json()["object"], "chat.completion.chunk", "{c:?}");
    }
    let content: String = chunks
        .iter()
        .filter_map(|c| {
            c.json()["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(content, "The time is noon.");
    b.stop().await.unwrap();
    a.stop().await.unwrap();
}

/// An HTTP server that holds each request's answer until the test releases it: a tool call
/// the test keeps in flight as long as it needs. Each request is told on `arrived` when it is
/// in, and answered after one message on `release`.
pub(crate) async fn gate() -> (u16, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (arrived_tx, arrived) = mpsc::channel(4);
    let (release, mut released) = mpsc::channel::<()>(4);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let _ = arrived_tx.send(()).await;
            if released.recv().await.is_none() {
                return;
            }
            let _ = socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 7\r\nconnection: close\r\n\r\nfetched")
                .await;
        }
    });
    (port, arrived, release)
}

/// An environment whose model is `provider` and whose `http_fetch` may reach the gate (on
/// 127.0.0.1) and wait for it as long as a test holds it; the configuration file it wrote,
/// for the test to remove.
pub(crate) fn slow_fetch_env(
    env: &mut TestEnv,
    provider: &wiremock::MockServer,
) -> std::path::PathBuf {
    let config = std::env::temp_dir().join(format!("{}-fetch.toml", env.ns));
    std::fs::write(
        &config,
        "[tools.http_fetch]\nallow_hosts = [\"127.0.0.1\"]\ntimeout_secs = 120\n",
    )
    .unwrap();
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test")
        .set("HERMES_CONFIG", config.to_str().unwrap());
    config
}

/// Wait until the next request is in the gate.
pub(crate) async fn in_gate(arrived: &mut mpsc::Receiver<()>) {
    tokio::time::timeout(Duration::from_secs(30), arrived.recv())
        .await
        .expect("the tool call reaches the gate")
        .expect("the gate is open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_ends_a_run_in_its_tool_round_with_no_further_model_call() {
    let (port, mut arrived, release) = gate().await;
    let url = format!("http://127.0.0.1:{port}/slow");
    let provider = provider_asking_for("http_fetch", json!({"url": url}), &["never"]).await;
    let mut env = TestEnv::new().await;
    let config = slow_fetch_env(&mut env, &provider);
    let fleet = env.start(&Service::ALL).await;
    let run = start_run(&fleet, KEY, json!({"input": "fetch the slow page"})).await;

    // The tool call is in flight, held by the gate.
    in_gate(&mut arrived).await;
    assert_eq!(run_in(&fleet, &run, "running").await["status"], "running");
    let (status, answer) = fleet
        .post_json(&format!("/v1/runs/{run}/stop"), KEY, &json!({}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, json!({"run_id": run, "status": "stopping"}));
    release.send(()).await.unwrap();

    let stopped = run_in(&fleet, &run, "cancelled").await;
    assert_eq!(stopped["error"]["code"], "cancelled", "{stopped}");
    assert!(stopped["stop_requested_at"].is_string(), "{stopped}");
    // The call that asked for the tool, and none after it: the run closed without one.
    let calls = provider_calls(&provider).await;
    assert_eq!(calls.len(), 1, "{calls:?}");

    // Its events end with the stop and the cancellation.
    let (events, ended) = read(open(&fleet, &run, None).await, |_| false).await;
    assert!(ended);
    assert_eq!(
        names(&events),
        [
            "run.queued",
            "run.running",
            "tool.started",
            "run.stopping",
            "tool.completed",
            "run.cancelled"
        ],
        "{events:?}"
    );
    assert_eq!(events[5].json()["error"]["code"], "cancelled");
    // Once over, a stop is refused as too late.
    let (status, answer) = fleet
        .post_json(&format!("/v1/runs/{run}/stop"), KEY, &json!({}))
        .await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        "the run already ended: cancelled"
    );

    // A streamed chat completion is a run too: stopped by its x-hermes-run-id mid tool
    // round, its stream ends with the `cancelled` error, and no second model call is made.
    let resp = fleet
        .post_chat(&json!({"messages": [{"role": "user", "content": "fetch it"}], "stream": true}))
        .await;
    assert_eq!(resp.status(), 200);
    let chat_run = resp.headers()["x-hermes-run-id"]
        .to_str()
        .unwrap()
        .to_string();
    in_gate(&mut arrived).await;
    let (status, _) = fleet
        .post_json(&format!("/v1/runs/{chat_run}/stop"), KEY, &json!({}))
        .await;
    assert_eq!(status, 200);
    release.send(()).await.unwrap();
    let (events, ended) = read(resp, |_| false).await;
    assert!(ended);
    let data: Vec<&str> = events
        .iter()
        .filter(|e| e.event.is_none())
        .map(|e| e.data.as_str())
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{events:?}");
    let error: Value = serde_json::from_str(data[data.len() - 2]).unwrap();
    assert_eq!(error["error"]["code"], "cancelled", "{error}");
    assert_eq!(provider_calls(&provider).await.len(), 2, "one call per run");
    let metrics = fleet.metrics().await;
    assert!(
        metrics.contains("hermes_runs_total{platform=\"api\",status=\"cancelled\"} 2"),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_events_redis_lost_still_ends_its_stream_and_unknown_events_are_passed_over() {
    let env = TestEnv::new().await;
    let fleet = env.start(&Service::ALL).await;
    let run = start_run(&fleet, KEY, json!({"input": "remember me"})).await;
    run_in(&fleet, &run, "completed").await;
    // Redis loses the run's stream (an eviction, a restart without persistence).
    let redis = redis::Client::open(env.vars["REDIS_URL"].as_str()).unwrap();
    let mut conn = redis.get_multiplexed_async_connection().await.unwrap();
    let removed: i64 = redis::cmd("DEL")
        .arg(format!("{}:run:{run}:events", env.ns))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(removed, 1, "the run had a stream");
    let (events, ended) = read(open(&fleet, &run, None).await, |_| false).await;
    assert!(ended);
    assert_eq!(names(&events), ["run.completed"], "{events:?}");
    assert_eq!(events[0].id, None, "nothing follows it to resume from");
    assert_eq!(events[0].json()["output"], "echo: remember me");

    // A stream holding an event of a kind this build does not know (a newer writer during a
    // rolling upgrade): it is passed over and the events around it still arrive.
    let key = format!("{}:run:{run}:events", env.ns);
    let final_event = hermes_cache::run_events::RunEvent::Final {
        outcome: hermes_types::model::Outcome::Answered {
            text: "from the stream".into(),
            model: "m".into(),
            usage: Default::default(),
            finish_reason: "stop".into(),
            tools_used: Vec::new(),
            transcript: Vec::new(),
        },
    };
    for event in [
        json!({"type": "quantum_leap", "to": "1999"}).to_string(),
        serde_json::to_string(&final_event).unwrap(),
    ] {
        let _: String = redis::cmd("XADD")
            .arg(&key)
            .arg("*")
            .arg("event")
            .arg(event)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let (events, ended) = read(open(&fleet, &run, None).await, |_| false).await;
    assert!(ended);
    assert_eq!(names(&events), ["run.completed"], "{events:?}");
    assert!(events[0].id.is_some(), "read from the stream, not the row");
    assert_eq!(events[0].json()["output"], "from the stream");
    fleet.stop().await.unwrap();
}
