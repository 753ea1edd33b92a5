//! What a run's model may make the tools stage do: only the tools the run was offered, under
//! its engagement mode and its agent's allowlist (docs/tools-and-mcp.md, "What a run may
//! call"); and a registry the router sees as soon as the tools service publishes it.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{TestEnv, eventually, metric, openai_answer, openai_tool_call, send};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The provider's requests, oldest first, as JSON.
async fn provider_calls(provider: &MockServer, n: usize) -> Vec<Value> {
    eventually(Duration::from_secs(30), "the provider's calls", || async {
        let got = provider.received_requests().await?;
        (got.len() >= n).then(|| {
            got.iter()
                .map(|r| serde_json::from_slice(&r.body).unwrap())
                .collect()
        })
    })
    .await
}

/// A provider that asks for `tool` first and answers once it sees a tool result.
async fn provider_asking_for(tool: &str, arguments: Value) -> MockServer {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("done", 40, 3)))
        .with_priority(1)
        .mount(&provider)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_tool_call(tool, &arguments)))
        .with_priority(2)
        .mount(&provider)
        .await;
    provider
}

/// The tool turn the second model call carried.
fn tool_result(call: &Value) -> Value {
    let tool = call["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .expect("a tool turn")
        .clone();
    serde_json::from_str(tool["content"].as_str().unwrap()).unwrap_or(tool["content"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_the_run_was_not_offered_is_refused_and_never_runs() {
    // "hi" is trivial: the run is offered no tool at all. A prompt-injected model names one
    // of the registry's tools anyway.
    let provider = provider_asking_for("current_time", json!({"timezone": "UTC"})).await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test");
    env.user(Platform::Rest, "mallory", 5).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    send(&bus, "mallory", "hi").await;

    let calls = provider_calls(&provider, 2).await;
    assert!(
        calls[0]
            .get("tools")
            .is_none_or(|t| t.as_array().unwrap().is_empty()),
        "a trivial message is offered no tool: {}",
        calls[0]
    );
    let result = tool_result(&calls[1]);
    assert_eq!(result["refused"], true, "{result}");
    assert_eq!(result["reason"], "not_offered", "{result}");
    assert_eq!(result["tool"], "current_time", "{result}");
    let metrics = fleet.metrics().await;
    assert_eq!(
        metric(
            &metrics,
            "hermes_tool_refusals_total{reason=\"not_offered\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "hermes_tool_calls_total{outcome=\"ok\",tool=\"current_time\"}"
        ),
        None,
        "the tool never ran: {metrics}"
    );
    bus.close().await;
    fleet.stop().await.unwrap();
}
