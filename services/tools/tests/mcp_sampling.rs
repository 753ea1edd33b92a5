//! Tools in sampling against a real server: `tests/mcp/sampling-server.mjs` (official
//! TypeScript SDK) runs a tool loop through `sampling/createMessage`, answered by our gateway
//! over a fake OpenAI-compatible model (`npm ci` in tests/mcp first).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hermes_config::McpServerSettings;
use hermes_tools::mcp::{Complete, GatewaySampling, McpHub};
use hermes_tools::policy::Permit;
use hermes_tools::{Outcome, Registry, execute};
use hermes_types::agent::EngagementMode;
use hermes_types::model::{ToolCall, ToolPolicy};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use wiremock::matchers::{body_string_contains, method};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn server_js() -> String {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").exists(),
        "run `npm ci` in tests/mcp"
    );
    dir.join("sampling-server.mjs").display().to_string()
}

/// A chat completions answer with `text`, 10 tokens in and 2 out.
fn text_answer(text: &str) -> Value {
    json!({"id": "c", "object": "chat.completion",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})
}

/// A chat completions answer calling `get_weather` for Oslo, 10 tokens in and 3 out.
fn weather_call() -> Value {
    json!({"id": "c", "object": "chat.completion",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
               {"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
                "finish_reason": "tool_calls"}],
           "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}})
}

/// A fake model: once a tool result is in the conversation it answers in text; before, it
/// calls `get_weather` when it is offered (`always_calls`: whatever the conversation), and
/// says it has no tools when it is not.
async fn fake_model(always_calls: bool) -> MockServer {
    let model = MockServer::start().await;
    let reply = |v: Value| ResponseTemplate::new(200).set_body_json(v);
    if !always_calls {
        Mock::given(method("POST"))
            .and(body_string_contains("\"role\":\"tool\""))
            .respond_with(reply(text_answer("It is sunny.")))
            .with_priority(1)
            .mount(&model)
            .await;
    }
    Mock::given(method("POST"))
        .and(body_string_contains("\"get_weather\""))
        .respond_with(reply(weather_call()))
        .with_priority(2)
        .mount(&model)
        .await;
    Mock::given(method("POST"))
        .respond_with(reply(text_answer("I have no tools.")))
        .with_priority(3)
        .mount(&model)
        .await;
    model
}

/// The bodies of the calls the fake model received.
async fn model_calls(model: &MockServer) -> Vec<Value> {
    let requests = model.received_requests().await.unwrap_or_default();
    requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// The names of the tools offered in one model call.
fn offered(call: &Value) -> Vec<String> {
    call["tools"]
        .as_array()
        .map(|tools| {
            let names = tools.iter().map(|t| t["function"]["name"].as_str());
            names.map(|n| n.unwrap_or_default().to_owned()).collect()
        })
        .unwrap_or_default()
}

struct Started {
    hub: Arc<McpHub>,
    registry: Registry,
    metrics: hermes_telemetry::ToolMetrics,
}

/// The server `weather` with `extra` settings, sampling answered through our gateway over
/// `model`.
async fn start(extra: &str, model: &MockServer) -> Started {
    let toml_text = format!(
        "[mcp_servers.weather]\ncommand = \"node\"\nargs = [{:?}]\n{extra}\n",
        server_js()
    );
    #[derive(serde::Deserialize)]
    struct File {
        mcp_servers: BTreeMap<String, McpServerSettings>,
    }
    let servers = toml::from_str::<File>(&toml_text).unwrap().mcp_servers;
    let telemetry = hermes_telemetry::Metrics::new();
    let (config, gateway) = hermes_gateway::gateway::testing::openai(&telemetry, &model.uri());
    let llm: Arc<dyn Complete> = Arc::new(GatewaySampling::new(gateway, config));
    let metrics = telemetry.tools.clone();
    let (tx, _changes) = mpsc::unbounded_channel();
    let hub = Arc::new(McpHub::start(&servers, &metrics, tx, Some(llm), Default::default()).await);
    let registry = Registry::default().with_mcp(hub.clone());
    hermes_testkit_core::eventually_sync(Duration::from_secs(20), "the server's tools", || {
        registry.get("mcp_weather_weather_agent").is_some()
    })
    .await;
    Started {
        hub,
        registry,
        metrics,
    }
}

/// Call the tool `name` with `arguments` as a run under `policy` would: how it ended and
/// the text the model gets.
async fn run_call(
    s: &Started,
    policy: &ToolPolicy,
    name: &str,
    arguments: Value,
) -> (Outcome, String) {
    let offered = s.registry.specs();
    let call = ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments,
        signature: None,
    };
    let permit = Permit {
        offered: &offered,
        policy,
    };
    let done = execute(&s.registry, permit, &call).await;
    (done.outcome, done.text)
}

/// [`run_call`] of a call that must succeed: its text.
async fn run_ok(s: &Started, policy: &ToolPolicy, name: &str, arguments: Value) -> String {
    let (outcome, text) = run_call(s, policy, name, arguments).await;
    assert_eq!(outcome, Outcome::Ok, "{text}");
    text
}

fn requests(s: &Started, outcome: &str) -> u64 {
    let series = &s.metrics.sampling_requests;
    series.with_label_values(&["weather", outcome]).get()
}

#[tokio::test]
async fn a_servers_tool_loop_runs_through_our_model_under_the_runs_policy() {
    let model = fake_model(false).await;
    let s = start("tools = { exclude = [\"wipe_disk\"] }", &model).await;
    let any_run = ToolPolicy::default();
    // We declare the `sampling.tools` capability.
    let capability = run_ok(&s, &any_run, "mcp_weather_capabilities", json!({})).await;
    assert_eq!(capability, r#"{"tools":{}}"#);

    // The model calls get_weather, the server runs it and sends the result back, and the
    // model's text ends the loop.
    let weather = json!({"city": "Oslo"});
    let out = run_ok(&s, &any_run, "mcp_weather_weather_agent", weather.clone()).await;
    assert_eq!(out, "final: It is sunny. after 1 tool round(s)");
    let calls = model_calls(&model).await;
    assert_eq!(calls.len(), 2);
    // The server's filter applies to the tools it offers in sampling.
    assert_eq!(offered(&calls[0]), ["get_weather"]);
    let messages = calls[1]["messages"].as_array().unwrap();
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        (&result["tool_call_id"], &result["content"]),
        (&json!("call_1"), &json!("sunny in Oslo"))
    );
    // Both calls counted and metered with the tokens the model reported.
    assert_eq!(requests(&s, "answered"), 2);
    let tokens = |d: &str| {
        let series = &s.metrics.sampling_tokens;
        series.with_label_values(&["weather", d]).get()
    };
    assert_eq!((tokens("input"), tokens("output")), (20, 5));
    s.hub.shutdown();

    // A local-host server: a run whose allowlist names the agent tool but not the toolset
    // has its policy applied to the sampling tools, so the model sees none.
    let model = fake_model(false).await;
    let s = start("local_host = true", &model).await;
    let narrow = ToolPolicy {
        engagement_mode: EngagementMode::Execute,
        tool_allowlist: Some(vec!["mcp_weather_weather_agent".into()]),
    };
    let out = run_ok(&s, &narrow, "mcp_weather_weather_agent", weather.clone()).await;
    assert_eq!(out, "final: I have no tools. after 0 tool round(s)");
    assert!(offered(&model_calls(&model).await[0]).is_empty());
    // The whole toolset allowed: both sampling tools are shown.
    let toolset = ToolPolicy {
        engagement_mode: EngagementMode::Execute,
        tool_allowlist: Some(vec!["mcp-weather".into()]),
    };
    let out = run_ok(&s, &toolset, "mcp_weather_weather_agent", weather).await;
    assert_eq!(out, "final: It is sunny. after 1 tool round(s)");
    assert_eq!(
        offered(&model_calls(&model).await[1]),
        ["get_weather", "wipe_disk"]
    );
    s.hub.shutdown();
}

#[tokio::test]
async fn a_tool_loop_past_max_tool_rounds_is_refused() {
    let model = fake_model(true).await;
    let s = start("sampling = { max_tool_rounds = 2 }", &model).await;
    let weather = json!({"city": "Oslo"});
    let (outcome, out) = run_call(
        &s,
        &ToolPolicy::default(),
        "mcp_weather_weather_agent",
        weather,
    )
    .await;
    // The refusal reaches the server's loop, which fails with it.
    assert_eq!(outcome, Outcome::Error);
    assert!(
        out.starts_with("error: sampling failed after 2 tool round(s)")
            && out.contains("went past max_tool_rounds (2 tool-use rounds in a row)"),
        "{out}"
    );
    assert_eq!(model_calls(&model).await.len(), 3);
    assert_eq!(requests(&s, "answered"), 2);
    assert_eq!(requests(&s, "tool_rounds_exceeded"), 1);
    s.hub.shutdown();

    // max_tool_rounds = 0: no `sampling.tools` capability, so the SDK refuses to send tools.
    let model = fake_model(true).await;
    let s = start("sampling = { max_tool_rounds = 0 }", &model).await;
    let any_run = ToolPolicy::default();
    let capability = run_ok(&s, &any_run, "mcp_weather_capabilities", json!({})).await;
    assert_eq!(capability, "{}");
    let (_, out) = run_call(
        &s,
        &ToolPolicy::default(),
        "mcp_weather_weather_agent",
        json!({"city": "Oslo"}),
    )
    .await;
    assert!(out.contains("does not support sampling tools"), "{out}");
    assert!(model_calls(&model).await.is_empty());
    s.hub.shutdown();
}
