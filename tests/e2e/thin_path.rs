//! A request travels ingest → router → llm (→ tools → llm) → delivery → back to the caller.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{OPENAI_KEY, TestEnv, openai_answer, openai_tool_call};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mock_answer_comes_back_with_usage() {
    let env = TestEnv::new().await;
    let fleet = env.start(&Service::ALL).await;
    let resp = fleet.chat("hello there").await;
    assert_eq!(resp.status(), 200);
    let run_id = resp.headers()["x-hermes-run-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "echo: hello there"
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5})
    );

    // The run is recorded in PostgreSQL, closed, with its usage.
    let db = env.db();
    let client = db.get().await.unwrap();
    let row = client
        .query_one(
            "SELECT status, output_text, tokens_in, tokens_out FROM agent_runs WHERE id = $1::text::uuid",
            &[&run_id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "completed");
    assert_eq!(row.get::<_, String>(1), "echo: hello there");
    assert_eq!((row.get::<_, i64>(2), row.get::<_, i64>(3)), (2, 3));

    // The metrics saw it.
    let metrics = fleet.metrics().await;
    assert!(
        metrics.contains("hermes_llm_calls_total{backend=\"claude-haiku\",tier=\"free\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("hermes_runs_total{platform=\"api\",status=\"completed\"} 1"));
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_runs_and_its_result_reaches_the_second_model_call() {
    let provider = MockServer::start().await;
    // Second call (the conversation now holds a tool result): the final answer.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(
            "It is evening in Tokyo.",
            40,
            6,
        )))
        .with_priority(1)
        .expect(1)
        .mount(&provider)
        .await;
    // First call: the model asks for current_time.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header(
            "authorization",
            format!("Bearer {OPENAI_KEY}").as_str(),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_tool_call(
            "current_time",
            &json!({"timezone":"Asia/Tokyo"}),
        )))
        .with_priority(2)
        .expect(1)
        .mount(&provider)
        .await;

    let mut env = TestEnv::new().await;
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test");
    let fleet = env.start(&Service::ALL).await;
    let resp = fleet.chat("what time is it in Tokyo?").await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "It is evening in Tokyo."
    );
    // Usage covers both calls.
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 70, "completion_tokens": 15, "total_tokens": 85})
    );

    let requests = provider.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let first: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(first["model"], "gpt-test");
    assert_eq!(first["max_tokens"], 1024);
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "current_time")
    );
    let second: Value = serde_json::from_slice(&requests[1].body).unwrap();
    let messages = second["messages"].as_array().unwrap();
    let assistant = &messages[messages.len() - 2];
    assert_eq!(assistant["tool_calls"][0]["id"], "call_1");
    let tool = messages.last().unwrap();
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_1");
    let result: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["timezone"], "Asia/Tokyo");
    assert!(
        result["datetime"].as_str().unwrap().ends_with("+09:00"),
        "{result}"
    );

    let metrics = fleet.metrics().await;
    assert!(
        metrics.contains("hermes_tool_calls_total{outcome=\"ok\",tool=\"current_time\"} 1"),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_keeps_failing_gives_a_clear_error_not_silence() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(503).set_body_json(json!({"error": {"message": "overloaded"}})),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri());
    let fleet = env.start(&Service::ALL).await;
    let resp = tokio::time::timeout(Duration::from_secs(20), fleet.chat("hi"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "providers_unavailable");
    // A sentence for the caller, never the provider's own text (docs/security.md).
    let told = body["error"]["message"].as_str().unwrap();
    assert!(
        told.starts_with("Sorry") && !told.contains("503") && !told.contains("overloaded"),
        "{body}"
    );
    fleet.stop().await.unwrap();
}
