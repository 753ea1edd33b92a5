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
        json!({"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5, "cost_usd": 0.0, "tool_calls_made": 0})
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
    // Second call (the conversation now holds a tool result): the final answer.
    let (provider, _env, fleet) = asking_for_the_time_then(
        ResponseTemplate::new(200).set_body_json(openai_answer("It is evening in Tokyo.", 40, 6)),
    )
    .await;
    let resp = fleet.chat("what time is it in Tokyo?").await;
    assert_eq!(resp.status(), 200);
    let run = resp.headers()["x-hermes-run-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "It is evening in Tokyo."
    );
    // Usage covers both calls, with Hermes's extension: the cost and the tool calls made.
    let usage = &body["usage"];
    assert_eq!(
        (
            &usage["prompt_tokens"],
            &usage["completion_tokens"],
            &usage["total_tokens"]
        ),
        (&json!(70), &json!(15), &json!(85)),
        "{usage}"
    );
    assert_eq!(usage["tool_calls_made"], 1, "{usage}");
    // The run's record says the same.
    let (status, shown) = fleet
        .get_json(&format!("/v1/runs/{run}"), hermes_testkit::KEY)
        .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["usage"]["tool_calls_made"], 1, "{shown}");
    assert_eq!(shown["usage"]["cost_usd"], usage["cost_usd"], "{shown}");
    assert!(usage["cost_usd"].as_f64().unwrap() > 0.0, "{usage}");

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

/// When the model fails after its tool round (the call that would phrase the tool's result),
/// the caller still gets an answer: the tool's raw output under a disclaimer, never silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_failing_after_the_tool_round_answers_with_the_tool_output_and_a_disclaimer() {
    let (_provider, _env, fleet) =
        asking_for_the_time_then(ResponseTemplate::new(500).set_body_string("upstream exploded"))
            .await;
    let resp = fleet.chat("what time is it in Tokyo?").await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();
    let (disclaimer, output) = text
        .split_once('\n')
        .expect("a disclaimer, then the output");
    assert!(
        disclaimer.contains("here is what my tools returned"),
        "{text}"
    );
    let output: Value = serde_json::from_str(output).expect("the tool's own JSON, untouched");
    assert_eq!(output["timezone"], "Asia/Tokyo", "{text}");
    assert_eq!(body["choices"][0]["finish_reason"], "tool_fallback");
    assert_eq!(body["usage"]["tool_calls_made"], 1);
    fleet.stop().await.unwrap();
}

/// A fleet on a model that asks for `current_time` in Tokyo on its first call and answers
/// `second` once the conversation holds the tool's result; each call is expected once. The
/// test environment goes back too: dropping it removes the fleet's database and namespace.
async fn asking_for_the_time_then(
    second: ResponseTemplate,
) -> (MockServer, TestEnv, hermes_testkit::Fleet) {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(second)
        .with_priority(1)
        .mount(&provider)
        .await;
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
    (provider, env, fleet)
}
