//! What a run's model may make the tools stage do: only the tools the run was offered, under
//! its engagement mode and its agent's allowlist (docs/tools-and-mcp.md, "What a run may
//! call"); and a registry the router sees as soon as the tools service publishes it.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{
    TestEnv, eventually, metric, openai_answer, openai_tool_then_answer, send, tool_result,
};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
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
    openai_tool_then_answer(tool, &arguments, "done").await
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
    let result = tool_result(&calls[1]).expect("a tool turn");
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

/// A configuration file with an MCP server that never answers (a process that does not
/// speak MCP), so its first connection attempt lasts its whole `connect_timeout`.
fn silent_server_config(ns: &str) -> std::path::PathBuf {
    let file = std::env::temp_dir().join(format!("{ns}-silent.toml"));
    std::fs::write(
        &file,
        "[mcp_servers.silent]\ncommand = \"sleep\"\nargs = [\"120\"]\nconnect_timeout = 60\n",
    )
    .unwrap();
    file
}

/// The names in the registry, sorted.
async fn registry(env: &TestEnv) -> Vec<String> {
    let c = env.db().get().await.unwrap();
    c.query("SELECT name FROM tool_registry ORDER BY name", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Publish `names` under `toolset`, as a tools replica would.
async fn publish(env: &TestEnv, toolset: &str, names: &[&str]) {
    let specs: Vec<hermes_types::model::ToolSpec> = names
        .iter()
        .map(|n| hermes_types::model::ToolSpec {
            name: (*n).into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
            toolset: toolset.into(),
        })
        .collect();
    let mut c = env.db().get().await.unwrap();
    hermes_db::tool_registry::publish(&mut c, &[toolset], &specs)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_fleet_offers_its_tools_to_the_first_message_and_forgets_removed_servers() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("noon", 10, 1)))
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    let config = silent_server_config(&env.ns);
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test")
        .set("HERMES_CONFIG", config.to_str().unwrap())
        // `silent` never answers: readiness waits for it this long only.
        .set("HERMES_TOOLS_READY_TIMEOUT", "1s");
    // A server of the previous configuration left its tools behind.
    publish(&env, "mcp-gone", &["mcp_gone_wipe_disk"]).await;
    env.user(Platform::Rest, "early", 5).await;
    let fleet = env.start(&Service::ALL).await;
    // Ready: the first message is offered the built-ins, while `silent` is still connecting
    // past the readiness bound.
    let bus = env.bus().await;
    send(&bus, "early", "what time is it in Tokyo right now?").await;
    let calls = provider_calls(&provider, 1).await;
    let offered: Vec<&str> = calls[0]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap())
                .collect()
        })
        .unwrap_or_default();
    assert!(offered.contains(&"current_time"), "{offered:?}");
    assert!(!offered.contains(&"mcp_gone_wipe_disk"), "{offered:?}");
    // Published with the built-ins, offered only to orchestrator workspaces' runs.
    assert!(!offered.contains(&"delegate_task_async"), "{offered:?}");
    assert_eq!(
        registry(&env).await,
        ["current_time", "delegate_task_async", "http_fetch"]
    );
    bus.close().await;
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_sees_a_registry_change_without_waiting_for_its_cache() {
    let env = TestEnv::new().await;
    env.user(Platform::Rest, "asker", 500).await;
    let fleet = env.start(&[Service::Router]).await;
    let bus = env.bus().await;
    // The registry is empty: the router reads that (and used to keep it for 30 s).
    send(&bus, "asker", "what time is it in Lima right now?").await;
    routed(&env, 1).await;
    assert_eq!(last_request(&env).await.1, Vec::<String>::new());

    publish(&env, "builtin", &["current_time"]).await;
    let mut sent = 1;
    eventually(Duration::from_secs(5), "the new tool offered", || {
        sent += 1;
        let (n, bus, env) = (sent, &bus, &env);
        async move {
            send(bus, "asker", "what time is it in Lima right now?").await;
            routed(env, n).await;
            let (_, offered) = last_request(env).await;
            offered.iter().any(|t| t == "current_time").then_some(())
        }
    })
    .await;
    bus.close().await;
    fleet.stop().await.unwrap();
}

/// Wait until the router has emitted `n` llm requests.
async fn routed(env: &TestEnv, n: i64) {
    let db = env.db();
    eventually(Duration::from_secs(30), "routed", || async {
        let got =
            hermes_testkit::count(&db, "SELECT count(*) FROM outbox WHERE stage = 'llm'", &[])
                .await;
        (got >= n).then_some(())
    })
    .await
}

/// The tool policy and offered tool names of the newest llm request in the outbox.
async fn last_request(env: &TestEnv) -> (Value, Vec<String>) {
    let c = env.db().get().await.unwrap();
    let row = c
        .query_one(
            "SELECT body FROM outbox WHERE stage = 'llm' ORDER BY id DESC LIMIT 1",
            &[],
        )
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(row.get::<_, &[u8]>(0)).unwrap();
    let tools = body["payload"]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    (body["payload"]["policy"].clone(), tools)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_tool_allowlist_is_set_with_the_cli_and_travels_with_its_runs() {
    let mut env = TestEnv::new().await;
    // `shell` is declared local-host (the router reads that from the configuration).
    let file = std::env::temp_dir().join(format!("{}-allow.toml", env.ns));
    std::fs::write(
        &file,
        "[mcp_servers.shell]\ncommand = \"/usr/local/bin/shell-mcp\"\nlocal_host = true\n",
    )
    .unwrap();
    env.set("HERMES_CONFIG", file.to_str().unwrap());
    let (code, _, err) = env
        .hermes(&[
            "agents",
            "create",
            "rex",
            "--name",
            "Rex",
            "--tool-allowlist",
            "mcp_shell_ls",
        ])
        .await;
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = env.hermes(&["agents", "show", "rex", "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["tool_allowlist"], json!(["mcp_shell_ls"]), "{out}");

    let user = env.user(Platform::Rest, "ops", 10).await;
    let c = env.db().get().await.unwrap();
    let rex = hermes_db::agents::by_key(&c, "default", "rex")
        .await
        .unwrap()
        .unwrap();
    hermes_db::users::update(&c, user.id, None, None, Some(Some(rex.id)))
        .await
        .unwrap();
    publish(&env, "builtin", &["current_time"]).await;
    publish(&env, "mcp-shell", &["mcp_shell_ls", "mcp_shell_rm"]).await;
    let fleet = env.start(&[Service::Router]).await;
    let bus = env.bus().await;
    send(&bus, "ops", "please list the files in the deploy folder").await;
    routed(&env, 1).await;
    let (policy, offered) = last_request(&env).await;
    assert_eq!(
        policy["tool_allowlist"],
        json!(["mcp_shell_ls"]),
        "{policy}"
    );
    assert!(offered.contains(&"mcp_shell_ls".to_owned()), "{offered:?}");
    assert!(offered.contains(&"current_time".to_owned()), "{offered:?}");
    assert!(
        !offered.contains(&"mcp_shell_rm".to_owned()),
        "a local-host tool outside the allowlist is not offered: {offered:?}"
    );

    // Cleared: no list applies any more, on the next message.
    let (code, _, err) = env
        .hermes(&["agents", "set", "rex", "--clear-tool-allowlist"])
        .await;
    assert_eq!(code, 0, "{err}");
    send(&bus, "ops", "please list the files in the deploy folder").await;
    routed(&env, 2).await;
    let (policy, offered) = last_request(&env).await;
    assert!(policy.get("tool_allowlist").is_none(), "{policy}");
    assert!(offered.contains(&"mcp_shell_rm".to_owned()), "{offered:?}");
    bus.close().await;
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(file);
}
