//! The tools stage with an MCP server: a model asks for a tool of the reference server
//! (`@modelcontextprotocol/server-everything` over stdio, from `tests/mcp/`), the tools
//! stage calls it, and its result reaches the second model call.

use std::path::PathBuf;
use std::time::Duration;

use hermes::Service;
use hermes_testkit::{
    TestEnv, count, eventually, everything_server_toml, openai_answer, openai_tool_call,
};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A configuration file naming the reference server as `everything`.
fn mcp_config(ns: &str) -> PathBuf {
    write_config(ns, "timeout = 10")
}

/// The configuration file of this test: the reference server with `extra` keys.
fn write_config(ns: &str, extra: &str) -> PathBuf {
    let file = std::env::temp_dir().join(format!("{ns}-mcp.toml"));
    std::fs::write(&file, everything_server_toml(extra)).unwrap();
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_calls_an_mcp_tool_and_its_result_reaches_the_second_call() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(
            "The sum is 42.",
            40,
            6,
        )))
        .with_priority(1)
        .expect(1)
        .mount(&provider)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_tool_call(
            "mcp_everything_get_sum",
            &json!({"a":2,"b":40}),
        )))
        .with_priority(2)
        .expect(1)
        .mount(&provider)
        .await;

    let mut env = TestEnv::new().await;
    let config = mcp_config(&env.ns);
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test")
        .set("HERMES_CONFIG", config.to_str().unwrap());
    let fleet = env.start(&Service::ALL).await;
    // A server's tools are published when it connects (after the built-ins, which a ready
    // fleet has published); the message waits for that publication.
    let db = env.db();
    eventually(
        Duration::from_secs(30),
        "the MCP tools published",
        || async {
            let published = count(
                &db,
                "SELECT count(*) FROM tool_registry WHERE name = 'mcp_everything_get_sum'",
                &[],
            )
            .await;
            (published > 0).then_some(())
        },
    )
    .await;
    let resp = fleet.chat("please add two and forty for me").await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "The sum is 42.");

    let requests = provider.received_requests().await.unwrap();
    assert_eq!(requests.len(), 2);
    let first: Value = serde_json::from_slice(&requests[0].body).unwrap();
    let offered = first["tools"].as_array().unwrap();
    let sum = offered
        .iter()
        .find(|t| t["function"]["name"] == "mcp_everything_get_sum")
        .expect("the MCP tool is offered to the model");
    assert_eq!(
        sum["function"]["parameters"]["properties"]["a"]["type"],
        "number"
    );
    let second: Value = serde_json::from_slice(&requests[1].body).unwrap();
    let tool = second["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_1");
    assert!(tool["content"].as_str().unwrap().contains("42"), "{tool}");

    // Published to the registry under its toolset; metrics saw the server and the call.
    let client = env.db().get().await.unwrap();
    let row = client
        .query_one(
            "SELECT toolset FROM tool_registry WHERE name = 'mcp_everything_get_sum'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "mcp-everything");
    drop(client);
    let metrics = fleet.metrics().await;
    assert!(
        metrics.contains("hermes_mcp_server_up{server=\"everything\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics
            .contains("hermes_tool_calls_total{outcome=\"ok\",tool=\"mcp_everything_get_sum\"} 1"),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(config);
}

/// The CLI's configuration when the file is invalid or empty (the CLI does not need it).
fn config_without_file(env: &TestEnv) -> hermes_config::Config {
    let mut vars = env.vars.clone();
    vars.remove("HERMES_CONFIG");
    hermes_config::Config::from_lookup(&move |k| vars.get(k).cloned(), None).unwrap()
}

/// The names registered under `toolset`.
async fn registered(env: &TestEnv, toolset: &str) -> Vec<String> {
    let client = env.db().get().await.unwrap();
    client
        .query(
            "SELECT name FROM tool_registry WHERE toolset = $1 ORDER BY name",
            &[&toolset],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

async fn wait_for(env: &TestEnv, toolset: &str, expected: &[&str]) {
    let what = format!("{toolset} to register {expected:?}");
    eventually(Duration::from_secs(30), &what, || async {
        (registered(env, toolset).await == expected).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_reload_rereads_the_configuration_file() {
    let mut env = TestEnv::new().await;
    let only = |tool: &str| {
        format!("tools = {{ include = [\"{tool}\"], resources = false, prompts = false }}")
    };
    let config = write_config(&env.ns, &only("echo"));
    env.set("HERMES_CONFIG", config.to_str().unwrap());
    let fleet = env.start(&[Service::Tools]).await;
    wait_for(&env, "mcp-everything", &["mcp_everything_echo"]).await;

    // The operator edits the file: reload applies it.
    write_config(&env.ns, &only("get-sum"));
    hermes::cli::tools::run(&env.config(), hermes::cli::tools::ToolsCommand::Reload)
        .await
        .unwrap();
    wait_for(&env, "mcp-everything", &["mcp_everything_get_sum"]).await;

    // An invalid file is refused; the replica keeps what it has.
    std::fs::write(&config, "[mcp_servers.everything]\ncomand = \"typo\"\n").unwrap();
    hermes::cli::tools::run(
        &config_without_file(&env),
        hermes::cli::tools::ToolsCommand::Reload,
    )
    .await
    .unwrap();
    // The replica counts the refusal; only then is the absence of a change meaningful.
    eventually(Duration::from_secs(10), "the reload refused", || async {
        fleet
            .metrics()
            .await
            .contains("hermes_tools_reloads_total{outcome=\"invalid\"} 1")
            .then_some(())
    })
    .await;
    assert_eq!(
        registered(&env, "mcp-everything").await,
        ["mcp_everything_get_sum"]
    );

    // A server removed from the file disappears from the registry.
    std::fs::write(&config, "").unwrap();
    hermes::cli::tools::run(
        &config_without_file(&env),
        hermes::cli::tools::ToolsCommand::Reload,
    )
    .await
    .unwrap();
    wait_for(&env, "mcp-everything", &[]).await;
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(config);
}
