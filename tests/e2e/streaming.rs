//! Streamed chat completions (`"stream": true`) through the whole fleet: the mock provider's
//! words reach the caller as `chat.completion.chunk` events while the run goes on.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{KEY, TestEnv, eventually};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The `data:` payloads of an SSE body, in order (comments such as keep-alives skipped).
fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .flat_map(|event| event.lines())
        .filter_map(|line| line.strip_prefix("data: "))
        .map(str::to_string)
        .collect()
}

/// POST a streamed chat completion and read the whole SSE body as it arrives; returns the
/// run id, the raw body and its `data:` payloads. The stream must end on its own.
async fn stream(fleet: &hermes_testkit::Fleet, request: Value) -> (String, String, Vec<String>) {
    let mut resp = fleet.post_chat(&request).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["cache-control"], "no-cache");
    let run_id = resp.headers()["x-hermes-run-id"]
        .to_str()
        .unwrap()
        .to_string();
    let mut body = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(bytes) = resp.chunk().await.expect("the stream reads") {
            body.extend_from_slice(&bytes);
        }
    })
    .await
    .expect("the stream ends");
    let body = String::from_utf8(body).expect("SSE is text");
    let data = sse_data(&body);
    (run_id, body, data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_arrives_as_chunks_with_usage_and_done() {
    let env = TestEnv::new().await;
    let fleet = env.start(&Service::ALL).await;
    let (run_id, body, data) = stream(
        &fleet,
        json!({
            "model": "hermes",
            "messages": [{"role": "user", "content": "hello streaming world"}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "temperature": 0.3,
            "max_tokens": 64,
        }),
    )
    .await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("every chunk is JSON"))
        .collect();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk", "{c}");
        assert_eq!(c["id"], format!("chatcmpl-{run_id}"));
        assert_eq!(c["model"], "hermes");
        assert!(c["created"].as_i64().is_some_and(|t| t > 0));
    }

    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role": "assistant"})
    );
    let content: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content.concat(), "echo: hello streaming world", "{body}");
    // The mock streams word by word: more than one piece means the deltas were relayed,
    // not the final text sent whole.
    assert!(content.len() > 1, "{body}");

    let n = chunks.len();
    let finish = &chunks[n - 2];
    assert_eq!(finish["choices"][0]["delta"], json!({}));
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    let usage = &chunks[n - 1];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7, "cost_usd": 0.0, "tool_calls_made": 0})
    );

    // The run is closed as for a non-streamed answer.
    let client = env.db().get().await.unwrap();
    let row = client
        .query_one(
            "SELECT status, output_text FROM agent_runs WHERE id = $1::text::uuid",
            &[&run_id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "completed");
    assert_eq!(row.get::<_, String>(1), "echo: hello streaming world");
    drop(client);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_parameters_reach_the_provider_and_its_stream_reaches_the_caller() {
    let provider = MockServer::start().await;
    let sse = [
        r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"{\"ok\""},"finish_reason":null}],"usage":null}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":": true}"},"finish_reason":null}],"usage":null}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        r#"{"id":"c1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":21,"completion_tokens":3,"total_tokens":24}}"#,
        "[DONE]",
    ]
    .iter()
    .map(|d| format!("data: {d}\n\n"))
    .collect::<String>();
    // Only a request carrying the caller's parameters is answered (anything else: 404).
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(json!({
            "stream": true,
            "temperature": 0.5,
            "top_p": 0.25,
            "stop": ["END"],
            "max_tokens": 32,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "json_object", "schema": {"type": "object"}, "strict": false},
            },
        })))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse),
        )
        .expect(1)
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&format!("{}/v1", provider.uri()));
    let fleet = env.start(&Service::ALL).await;
    let (_, body, data) = stream(
        &fleet,
        json!({
            "messages": [{"role": "user", "content": "answer in JSON"}],
            "stream": true,
            "temperature": 0.5,
            "top_p": 0.25,
            "stop": "END",
            "max_completion_tokens": 32,
            "response_format": {"type": "json_object"},
        }),
    )
    .await;
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("every chunk is JSON"))
        .collect();
    assert_eq!(
        chunks[0]["choices"][0]["delta"]["role"], "assistant",
        "{body}"
    );
    let content: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    // The provider's two pieces arrive as two chunks.
    assert_eq!(content, [r#"{"ok""#, ": true}"], "{body}");
    // Without include_usage: no usage anywhere, and the finish chunk comes last.
    assert!(chunks.iter().all(|c| c.get("usage").is_none()), "{body}");
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    // Without a model in the request, the chunks name the configured API model.
    assert_eq!(last["model"], "hermes");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_outlasts_the_timeout_ends_the_stream_with_an_error() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_millis(2500))
                .set_body_json(hermes_testkit::openai_answer("too late", 1, 2)),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_RUN_TIMEOUT_SECS", "1");
    let fleet = env.start(&Service::ALL).await;
    let (run_id, body, data) = stream(
        &fleet,
        json!({"messages": [{"role": "user", "content": "hi"}], "stream": true}),
    )
    .await;
    assert_eq!(data.len(), 3, "{body}");
    let role: Value = serde_json::from_str(&data[0]).unwrap();
    assert_eq!(role["choices"][0]["delta"]["role"], "assistant");
    let error: Value = serde_json::from_str(&data[1]).unwrap();
    assert_eq!(error["error"]["code"], "run_timeout", "{body}");
    assert_eq!(error["error"]["type"], "run_timeout");
    assert!(
        error["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&run_id)),
        "{body}"
    );
    assert_eq!(data[2], "[DONE]");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_stream_holds_its_in_flight_slot_until_it_ends() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_delay(Duration::from_millis(1500))
                .set_body_json(hermes_testkit::openai_answer("slow", 1, 1)),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_MAX_IN_FLIGHT", "1")
        .openai_mock(&format!("{}/v1", provider.uri()));
    let fleet = env.start(&Service::ALL).await;
    let open = fleet
        .post_chat(&json!({"messages": [{"role": "user", "content": "hold"}], "stream": true}))
        .await;
    // The stream's headers are out and its handler has returned; the slot is still taken.
    assert_eq!(open.status(), 200);
    let shed = fleet.chat("one too many").await;
    assert_eq!(shed.status(), 503);
    let body = tokio::time::timeout(Duration::from_secs(30), open.text())
        .await
        .expect("the stream ends")
        .unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    // Once the stream has ended, the slot is free again.
    eventually(Duration::from_secs(5), "the slot released", || async {
        let resp = reqwest::get(fleet.url("/v1/models")).await.unwrap();
        // /v1/models sits behind the same bound (and answers 401 without a key when free).
        (resp.status() != 503).then_some(())
    })
    .await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_parameters_are_refused_before_anything_is_published() {
    let env = TestEnv::new().await;
    // Ingest alone: whatever it published would stay in the router queue.
    let fleet = env.start(&[Service::Ingest]).await;
    let http = reqwest::Client::new();
    for extra in [
        json!({"temperature": 3}),
        json!({"top_p": -0.5}),
        json!({"stop": ["a", "b", "c", "d", "e"]}),
        json!({"max_completion_tokens": 0}),
        json!({"response_format": {"type": "yaml"}}),
    ] {
        let mut request = json!({"messages": [{"role": "user", "content": "hi"}], "stream": true});
        for (k, v) in extra.as_object().unwrap() {
            request[k] = v.clone();
        }
        let resp = http
            .post(fleet.url("/v1/chat/completions"))
            .bearer_auth(KEY)
            .json(&request)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{extra}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_request", "{extra}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
    }
    let bus = env.bus().await;
    let (messages, _) = bus
        .queue_stats(&bus.names().queue(hermes_bus::Stage::Router))
        .await
        .unwrap();
    assert_eq!(messages, 0, "refused requests must publish nothing");
    bus.close().await;
    fleet.stop().await.unwrap();
}
