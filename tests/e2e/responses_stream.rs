//! Streamed responses through the whole fleet (docs/api.md, "Responses", streaming): the
//! Responses events in the order the SDKs expect, tool calls as output items, and the
//! streamed response stored like any other.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{KEY, TestEnv};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::responses::{answer, fleet_on, item_types, retrieve};

/// The `(event, data)` pairs of an SSE body.
fn sse_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut event = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = Some(e.to_string());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data = Some(serde_json::from_str(d).expect("every event is JSON"));
                }
            }
            Some((event?, data?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_response_comes_as_responses_events_in_order() {
    let env = TestEnv::new().await;
    let fleet = env.start(&Service::ALL).await;
    let (body, events) = stream(&fleet, "stream these words please").await;
    let kinds: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    let deltas = kinds
        .iter()
        .filter(|k| **k == "response.output_text.delta")
        .count();
    assert!(deltas >= 1, "{body}");
    let mut expected = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    expected.extend(std::iter::repeat_n("response.output_text.delta", deltas));
    expected.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(kinds, expected, "{body}");
    let streamed: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"].as_str())
        .collect();
    assert_eq!(streamed, "echo: stream these words please");
    let completed = &events.last().unwrap().1["response"];
    assert_eq!(completed["status"], "completed");
    assert_eq!(answer(completed), streamed);
    assert_eq!(completed["output"][0]["id"], events[2].1["item"]["id"]);
    // The streamed response is stored like any other.
    let (status, got) = retrieve(&fleet, KEY, &completed["id"]).await;
    assert_eq!(status, 200);
    assert_eq!(got["output"], completed["output"]);
    fleet.stop().await.unwrap();
}

/// POST a streamed response of `input` and read the whole body: the raw text and its events,
/// each checked to name its type and to carry the next sequence number.
async fn stream(fleet: &hermes_testkit::Fleet, input: &str) -> (String, Vec<(String, Value)>) {
    let resp = reqwest::Client::new()
        .post(fleet.url("/v1/responses"))
        .bearer_auth(KEY)
        .timeout(Duration::from_secs(90))
        .json(&json!({"input": input, "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let body = resp.text().await.unwrap();
    let events = sse_events(&body);
    for (n, (event, data)) in events.iter().enumerate() {
        assert_eq!(data["type"], event.as_str(), "{body}");
        assert_eq!(data["sequence_number"], n as u64, "{body}");
    }
    (body, events)
}

/// An OpenAI-compatible provider's streamed answer of `chunks` (`data:` payloads).
fn provider_stream(chunks: &[Value]) -> ResponseTemplate {
    let body: String = chunks
        .iter()
        .map(|c| format!("data: {c}\n\n"))
        .chain(["data: [DONE]\n\n".to_string()])
        .collect();
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_tool_round_shows_its_calls_and_outputs_as_items() {
    let provider = MockServer::start().await;
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let usage = json!({"id": "c", "object": "chat.completion.chunk", "choices": [],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}});
    // After the tool round: the answer in two pieces.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(provider_stream(&[
            chunk(
                json!({"role": "assistant", "content": "It is "}),
                Value::Null,
            ),
            chunk(json!({"content": "noon."}), Value::Null),
            chunk(json!({}), json!("stop")),
            usage.clone(),
        ]))
        .with_priority(1)
        .mount(&provider)
        .await;
    // First: the model asks for the time.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(provider_stream(&[
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "current_time", "arguments": "{\"timezone\":\"UTC\"}"}}]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
            usage,
        ]))
        .with_priority(2)
        .mount(&provider)
        .await;
    let (_env, fleet) = fleet_on(&provider).await;
    let (body, events) = stream(&fleet, "what time is it?").await;
    let (last, completed) = events.last().unwrap();
    assert_eq!(last, "response.completed", "{body}");
    let completed = &completed["response"];
    assert_eq!(
        item_types(completed),
        ["function_call", "function_call_output", "message"]
    );
    assert_eq!(answer(completed), "It is noon.");
    // Every item of the completed response was streamed: added, then done, once, each at an
    // output index of its own.
    let streamed = |kind: &str| -> Vec<(u64, Value)> {
        events
            .iter()
            .filter(|(e, _)| e == kind)
            .map(|(_, d)| (d["output_index"].as_u64().unwrap(), d["item"]["id"].clone()))
            .collect()
    };
    let (added, done) = (
        streamed("response.output_item.added"),
        streamed("response.output_item.done"),
    );
    assert_eq!(added.len(), 3, "{body}");
    let mut indexes: Vec<u64> = added.iter().map(|(i, _)| *i).collect();
    indexes.sort();
    assert_eq!(indexes, [0, 1, 2]);
    for item in completed["output"].as_array().unwrap() {
        let at = |list: &[(u64, Value)]| {
            list.iter()
                .find(|(_, id)| *id == item["id"])
                .map(|(i, _)| *i)
        };
        assert!(
            at(&added).is_some() && at(&added) == at(&done),
            "{item} in {body}"
        );
    }
    let call = events
        .iter()
        .find(|(e, d)| e == "response.output_item.done" && d["item"]["type"] == "function_call")
        .map(|(_, d)| &d["item"])
        .unwrap();
    assert_eq!(
        (&call["call_id"], &call["name"], &call["arguments"]),
        (
            &json!("call_1"),
            &json!("current_time"),
            &json!("{\"timezone\":\"UTC\"}")
        )
    );
    let text: String = events
        .iter()
        .filter_map(|(_, d)| d["delta"].as_str())
        .collect();
    assert_eq!(text, "It is noon.");
    fleet.stop().await.unwrap();
}
