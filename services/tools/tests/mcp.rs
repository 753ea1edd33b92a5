//! The MCP client against real servers: the reference `@modelcontextprotocol/server-everything`
//! and `tests/mcp/dynamic-server.mjs` (official TypeScript SDK), both from `tests/mcp/`
//! (`npm ci` there; `scripts/test` does it when `node_modules` is missing).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_config::McpServerSettings;
use hermes_tools::mcp::{Complete, GatewaySampling, McpHub, ToolsetChanged};
use hermes_tools::{Registry, ToolError};
use prometheus::IntGaugeVec;
use serde_json::json;
use tokio::sync::mpsc;

fn servers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp")
}

fn everything_js() -> String {
    let path =
        servers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        path.exists(),
        "{} is missing: run `npm ci` in tests/mcp",
        path.display()
    );
    path.display().to_string()
}

fn dynamic_js() -> String {
    servers_dir()
        .join("dynamic-server.mjs")
        .display()
        .to_string()
}

/// `[mcp_servers]` from TOML text.
fn servers(toml_text: &str) -> BTreeMap<String, McpServerSettings> {
    #[derive(serde::Deserialize)]
    struct File {
        mcp_servers: BTreeMap<String, McpServerSettings>,
    }
    toml::from_str::<File>(toml_text).unwrap().mcp_servers
}

fn tool_metrics() -> hermes_telemetry::ToolMetrics {
    hermes_telemetry::Metrics::new().tools.clone()
}

struct Started {
    hub: Arc<McpHub>,
    registry: Registry,
    metrics: hermes_telemetry::ToolMetrics,
    up: IntGaugeVec,
    changes: mpsc::UnboundedReceiver<ToolsetChanged>,
}

async fn start(toml_text: &str) -> Started {
    start_with(toml_text, None).await
}

async fn start_with(toml_text: &str, llm: Option<Arc<dyn Complete>>) -> Started {
    let metrics = tool_metrics();
    let up = metrics.mcp_server_up.clone();
    let (tx, changes) = mpsc::unbounded_channel();
    let hub =
        Arc::new(McpHub::start(&servers(toml_text), &metrics, tx, llm, Default::default()).await);
    let registry = Registry::default().with_mcp(hub.clone());
    Started {
        hub,
        registry,
        metrics,
        up,
        changes,
    }
}

fn everything(extra: &str) -> String {
    format!(
        "[mcp_servers.every-thing]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n{extra}\n",
        everything_js()
    )
}

fn names(registry: &Registry) -> Vec<String> {
    registry.specs().into_iter().map(|s| s.name).collect()
}

async fn call(
    registry: &Registry,
    name: &str,
    args: serde_json::Value,
) -> Result<String, ToolError> {
    let tool = registry
        .get(name)
        .unwrap_or_else(|| panic!("{name} is not registered"));
    tool.call(&args).await
}

async fn eventually(what: &str, check: impl FnMut() -> bool) {
    hermes_testkit_core::eventually_sync(Duration::from_secs(20), what, check).await
}

#[tokio::test]
async fn discovers_and_names_the_reference_servers_tools_with_its_utilities() {
    let s = start(&everything("")).await;
    let names = names(&s.registry);
    for expected in [
        "mcp_every_thing_echo",
        "mcp_every_thing_get_sum",
        "mcp_every_thing_get_env",
        "mcp_every_thing_trigger_long_running_operation",
        "mcp_every_thing_list_resources",
        "mcp_every_thing_read_resource",
        "mcp_every_thing_list_prompts",
        "mcp_every_thing_get_prompt",
    ] {
        assert!(
            names.contains(&expected.to_owned()),
            "{expected} missing from {names:?}"
        );
    }
    let specs = s.registry.specs();
    let echo = specs
        .iter()
        .find(|t| t.name == "mcp_every_thing_echo")
        .unwrap();
    assert_eq!(echo.toolset, "mcp-every-thing");
    assert_eq!(echo.parameters["properties"]["message"]["type"], "string");
    assert!(specs.iter().all(|t| t.toolset == "mcp-every-thing"));
    assert_eq!(s.up.with_label_values(&["every-thing"]).get(), 1);

    // Calls with arguments, and the utilities.
    let sum = call(
        &s.registry,
        "mcp_every_thing_get_sum",
        json!({"a": 2, "b": 40}),
    )
    .await
    .unwrap();
    assert!(sum.contains("42"), "{sum}");
    let echoed = call(
        &s.registry,
        "mcp_every_thing_echo",
        json!({"message": "hello hermes"}),
    )
    .await
    .unwrap();
    assert!(echoed.contains("hello hermes"), "{echoed}");
    let prompts = call(&s.registry, "mcp_every_thing_list_prompts", json!({}))
        .await
        .unwrap();
    assert!(prompts.contains("simple-prompt"), "{prompts}");
    let prompt = call(
        &s.registry,
        "mcp_every_thing_get_prompt",
        json!({"name": "args-prompt", "arguments": {"city": "Lyon"}}),
    )
    .await
    .unwrap();
    assert!(prompt.contains("Lyon"), "{prompt}");
    let resources = call(&s.registry, "mcp_every_thing_list_resources", json!({}))
        .await
        .unwrap();
    assert!(
        resources.contains("demo://resource/static/document/"),
        "{resources}"
    );
    s.hub.shutdown();
}

#[tokio::test]
async fn include_wins_over_exclude_and_everything_filtered_registers_nothing() {
    let s = start(&everything(
        "tools = { include = [\"echo\"], exclude = [\"echo\", \"get-sum\"], prompts = false }",
    ))
    .await;
    assert_eq!(
        names(&s.registry),
        [
            "mcp_every_thing_echo",
            "mcp_every_thing_list_resources",
            "mcp_every_thing_read_resource"
        ]
    );
    s.hub.shutdown();

    let s = start(&everything(
        "tools = { exclude = [\"get-sum\"], resources = false }",
    ))
    .await;
    let all = names(&s.registry);
    assert!(!all.contains(&"mcp_every_thing_get_sum".to_owned()));
    assert!(all.contains(&"mcp_every_thing_echo".to_owned()));
    assert!(!all.contains(&"mcp_every_thing_list_resources".to_owned()));
    assert!(!all.contains(&"mcp_every_thing_read_resource".to_owned()));
    assert!(all.contains(&"mcp_every_thing_get_prompt".to_owned()));
    s.hub.shutdown();

    let s = start(&everything(
        "tools = { include = [\"no-such-tool\"], resources = false, prompts = false }",
    ))
    .await;
    assert!(s.registry.specs().is_empty());
    s.hub.shutdown();
}

#[tokio::test]
async fn utilities_only_when_the_server_supports_them_and_disabled_servers_never_start() {
    let toml_text = format!(
        "[mcp_servers.dyn]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\
         [mcp_servers.off]\ncommand = \"/nonexistent/never-run\"\nenabled = false\n",
        dynamic_js()
    );
    let s = start(&toml_text).await;
    // The dynamic server has tools only: no resource or prompt utilities.
    assert_eq!(
        names(&s.registry),
        [
            "mcp_dyn_burst",
            "mcp_dyn_fail",
            "mcp_dyn_grow",
            "mcp_dyn_hold",
            "mcp_dyn_lists",
            "mcp_dyn_whoami"
        ]
    );
    assert_eq!(s.up.with_label_values(&["off"]).get(), 0);
    s.hub.shutdown();
}

#[tokio::test]
async fn a_slow_call_times_out_without_unregistering_the_servers_tools() {
    let s = start(&everything("timeout = 1")).await;
    let started = Instant::now();
    let err = call(
        &s.registry,
        "mcp_every_thing_trigger_long_running_operation",
        json!({"duration": 10, "steps": 2}),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ToolError::Timeout(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(names(&s.registry).contains(&"mcp_every_thing_echo".to_owned()));
    let echoed = call(
        &s.registry,
        "mcp_every_thing_echo",
        json!({"message": "still here"}),
    )
    .await
    .unwrap();
    assert!(echoed.contains("still here"));
    s.hub.shutdown();
}

/// The pid of the child whose environment holds `marker`.
fn pid_with_marker(marker: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            environ
                .split(|b| *b == 0)
                .any(|kv| kv == marker.as_bytes())
                .then_some(pid)
        })
}

#[tokio::test]
async fn a_server_killed_mid_call_answers_with_an_error_then_is_restarted() {
    let marker = format!("HERMES_TEST_MARKER=kill-{}", std::process::id());
    let (key, value) = marker.split_once('=').unwrap();
    let s = start(&format!(
        "[mcp_servers.dyn]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\nenv = {{ {key} = {value:?} }}\n",
        dynamic_js()
    ))
    .await;
    let pid = pid_with_marker(&marker).expect("the child runs");
    // The server writes this file once it has the call: it is killed mid-call, not before.
    let held = std::env::temp_dir().join(format!("hermes-mcp-held-{}", std::process::id()));
    let _ = std::fs::remove_file(&held);
    let registry = s.registry.clone();
    let path = held.display().to_string();
    let slow =
        tokio::spawn(async move { call(&registry, "mcp_dyn_hold", json!({"path": path})).await });
    eventually("the call held by the server", || held.exists()).await;
    let _ = std::fs::remove_file(&held);
    let killed = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let err = tokio::time::timeout(Duration::from_secs(10), slow)
        .await
        .expect("the call ends when the server dies")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, ToolError::Failed(_)), "{err:?}");
    // Restarted by the supervisor: a new child, the gauge back to 1, calls work again.
    eventually("a new child", || {
        pid_with_marker(&marker).is_some_and(|p| p != pid)
    })
    .await;
    let up = s.up.clone();
    eventually("the server up again", || {
        up.with_label_values(&["dyn"]).get() == 1
    })
    .await;
    let answer = hermes_testkit_core::eventually(
        Duration::from_secs(10),
        "a call after the restart",
        || {
            let registry = s.registry.clone();
            async move { call(&registry, "mcp_dyn_whoami", json!({})).await.ok() }
        },
    )
    .await;
    assert_eq!(answer, "dynamic over stdio");
    s.hub.shutdown();
}

#[tokio::test]
async fn the_service_environment_does_not_reach_a_stdio_child() {
    // Cargo and nextest set these in the test process; none is in the baseline.
    let service_only = ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME"];
    for name in service_only {
        assert!(
            std::env::var(name).is_ok(),
            "{name} should be set in the test process"
        );
    }
    let s = start(&everything(
        "env = { CONFIGURED_FOR_CHILD = \"visible-value\" }",
    ))
    .await;
    let out = call(&s.registry, "mcp_every_thing_get_env", json!({}))
        .await
        .unwrap();
    let env: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&out).unwrap();
    for name in service_only {
        assert!(!env.contains_key(name), "{name} leaked into the child");
    }
    assert_eq!(env["CONFIGURED_FOR_CHILD"], "visible-value");
    assert!(env.contains_key("PATH"));
    assert!(
        env.keys()
            .all(|k| hermes_tools::mcp::in_baseline(k) || k == "CONFIGURED_FOR_CHILD"),
        "{:?}",
        env.keys().collect::<Vec<_>>()
    );
    s.hub.shutdown();
}

#[tokio::test]
async fn tool_list_changed_refreshes_the_servers_tools() {
    let toml_text = format!(
        "[mcp_servers.dyn]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        dynamic_js()
    );
    let mut s = start(&toml_text).await;
    let first = s.changes.recv().await.unwrap();
    assert_eq!(first.toolset, "mcp-dyn");
    assert!(s.registry.get("mcp_dyn_grown_1").is_none());
    call(&s.registry, "mcp_dyn_grow", json!({})).await.unwrap();
    let change = tokio::time::timeout(Duration::from_secs(10), s.changes.recv())
        .await
        .expect("a republication after list_changed")
        .unwrap();
    assert_eq!(change.toolset, "mcp-dyn");
    assert!(change.specs.iter().any(|t| t.name == "mcp_dyn_grown_1"));
    let grown = call(&s.registry, "mcp_dyn_grown_1", json!({}))
        .await
        .unwrap();
    assert_eq!(grown, "grown 1");
    s.hub.shutdown();
}

/// A burst of `list_changed` (50 at once) never runs two refreshes of one server at once: the
/// server counts the `tools/list` requests it holds at the same time.
#[tokio::test]
async fn a_burst_of_list_changed_never_overlaps_refreshes() {
    let toml_text = format!(
        "[mcp_servers.dyn]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        dynamic_js()
    );
    let mut s = start(&toml_text).await;
    tokio::time::timeout(Duration::from_secs(30), s.changes.recv())
        .await
        .expect("the first discovery")
        .unwrap();
    call(&s.registry, "mcp_dyn_burst", json!({"n": 50}))
        .await
        .unwrap();
    // The burst's notifications came before `grow`'s, so once the grown tool is published
    // every refresh the burst asked for has run.
    call(&s.registry, "mcp_dyn_grow", json!({})).await.unwrap();
    loop {
        let change = tokio::time::timeout(Duration::from_secs(30), s.changes.recv())
            .await
            .expect("a republication after the burst and the growth")
            .unwrap();
        if change.specs.iter().any(|t| t.name == "mcp_dyn_grown_1") {
            break;
        }
    }
    let lists: serde_json::Value =
        serde_json::from_str(&call(&s.registry, "mcp_dyn_lists", json!({})).await.unwrap())
            .unwrap();
    assert_eq!(lists["max_concurrent"], 1, "refreshes overlapped: {lists}");
    let total = lists["total"].as_u64().unwrap();
    // The first discovery, at least one refresh for the burst, one for the growth; never
    // more than one per notification.
    assert!((3..=52).contains(&total), "{lists}");
    s.hub.shutdown();
}

#[tokio::test]
async fn error_results_reach_the_model_with_credentials_scrubbed() {
    let toml_text = format!(
        "[mcp_servers.dyn]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        dynamic_js()
    );
    let s = start(&toml_text).await;
    let err = call(
        &s.registry,
        "mcp_dyn_fail",
        json!({"secret": "eyJhbGciOiJIUzI1NiJ9.payload"}),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("upstream refused"), "{text}");
    assert!(!text.contains("eyJhbGci"), "{text}");
    s.hub.shutdown();
}

/// Start the dynamic server in HTTP mode on a free port, requiring `x-api-key: <key>`.
async fn http_server(key: &str) -> (tokio::process::Child, u16) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new("node")
        .args([dynamic_js().as_str(), "http", "0", key])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let port = line.strip_prefix("listening ").unwrap().parse().unwrap();
    (child, port)
}

#[tokio::test]
async fn streamable_http_server_with_a_required_header() {
    let (_server, port) = http_server("k-123456").await;
    let good = start(&format!(
        "[mcp_servers.remote]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ x-api-key = \"k-123456\" }}\nconnect_timeout = 5\n"
    ))
    .await;
    assert_eq!(good.up.with_label_values(&["remote"]).get(), 1);
    let answer = call(&good.registry, "mcp_remote_whoami", json!({}))
        .await
        .unwrap();
    assert_eq!(answer, "dynamic over http");
    good.hub.shutdown();

    let bad = start(&format!(
        "[mcp_servers.remote]\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ x-api-key = \"wrong\" }}\nconnect_timeout = 2\n"
    ))
    .await;
    assert_eq!(bad.up.with_label_values(&["remote"]).get(), 0);
    assert!(bad.registry.specs().is_empty());
    bad.hub.shutdown();
}

fn call_of(name: &str, arguments: serde_json::Value) -> hermes_types::model::ToolCall {
    hermes_types::model::ToolCall {
        id: "call_1".into(),
        name: name.into(),
        arguments,
        signature: None,
    }
}

#[tokio::test]
async fn a_review_run_cannot_execute_a_local_host_tool_and_an_allowlist_admits_only_its_tools() {
    use hermes_tools::policy::{Permit, RefusalReason};
    use hermes_tools::{Outcome, execute as execute_under};
    use hermes_types::agent::EngagementMode;
    use hermes_types::model::ToolPolicy;

    // `terminal` stands for a shell server: declared local-host. `every-thing` is not.
    let toml_text = format!(
        "[mcp_servers.terminal]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\nlocal_host = true\n{}",
        dynamic_js(),
        everything("")
    );
    let s = start(&toml_text).await;
    // Every tool is offered here: this test is about the host-tool policy.
    let offered = s.registry.specs();
    let execute =
        |registry: &Registry, policy: &ToolPolicy, call: &hermes_types::model::ToolCall| {
            let (registry, policy, call, offered) = (
                registry.clone(),
                policy.clone(),
                call.clone(),
                offered.clone(),
            );
            async move {
                let permit = Permit {
                    offered: &offered,
                    policy: &policy,
                };
                execute_under(&registry, permit, &call).await
            }
        };
    let grow = call_of("mcp_terminal_grow", json!({}));
    let echo = call_of("mcp_every_thing_echo", json!({"message": "hi"}));
    let whoami = call_of("mcp_terminal_whoami", json!({}));

    for mode in [
        EngagementMode::Review,
        EngagementMode::Research,
        EngagementMode::Discuss,
    ] {
        let policy = ToolPolicy {
            engagement_mode: mode,
            tool_allowlist: None,
        };
        let refused = execute(&s.registry, &policy, &grow).await;
        assert_eq!(
            refused.outcome,
            Outcome::Refused(RefusalReason::EngagementMode)
        );
        let body: serde_json::Value = serde_json::from_str(&refused.text).unwrap();
        assert_eq!(body["refused"], true);
        assert_eq!(body["reason"], "engagement_mode");
        assert_eq!(body["engagement_mode"], mode.as_str());
        // Other toolsets stay available.
        assert_eq!(
            execute(&s.registry, &policy, &echo).await.outcome,
            Outcome::Ok
        );
    }
    // Never executed: had `grow` run, the server would now list `grown_1`.
    let tools = names(&s.registry);
    assert!(
        !tools.iter().any(|n| n.starts_with("mcp_terminal_grown")),
        "{tools:?}"
    );

    // EXECUTE with an allowlist naming one tool: that tool runs, the rest of the
    // local-host toolset does not; non-local tools are not affected.
    let listed = ToolPolicy {
        engagement_mode: EngagementMode::Execute,
        tool_allowlist: Some(vec!["mcp_terminal_whoami".into()]),
    };
    let ran = execute(&s.registry, &listed, &whoami).await;
    assert_eq!(
        (ran.outcome, ran.text.as_str()),
        (Outcome::Ok, "dynamic over stdio")
    );
    assert_eq!(
        execute(&s.registry, &listed, &grow).await.outcome,
        Outcome::Refused(RefusalReason::NotAllowlisted)
    );
    assert_eq!(
        execute(&s.registry, &listed, &echo).await.outcome,
        Outcome::Ok
    );
    // The whole toolset by name.
    let toolset = ToolPolicy {
        engagement_mode: EngagementMode::Execute,
        tool_allowlist: Some(vec!["mcp-terminal".into()]),
    };
    assert_eq!(
        execute(&s.registry, &toolset, &whoami).await.outcome,
        Outcome::Ok
    );
    // A run started from a REVIEW run stays restricted even if it asks for EXECUTE.
    let parent = ToolPolicy {
        engagement_mode: EngagementMode::Review,
        tool_allowlist: None,
    };
    let child = parent.inherit(&toolset);
    assert_eq!(
        execute(&s.registry, &child, &whoami).await.outcome,
        Outcome::Refused(RefusalReason::EngagementMode)
    );
    s.hub.shutdown();
}

/// Our model path over the built-in mock provider (it answers `echo: <last user turn>`).
fn mock_llm() -> Arc<dyn Complete> {
    let (config, gateway) =
        hermes_gateway::gateway::testing::mock(&hermes_telemetry::Metrics::new());
    Arc::new(GatewaySampling::new(gateway, config))
}

#[tokio::test]
async fn sampling_requests_of_the_reference_server_are_answered_by_our_models() {
    let s = start_with(
        &everything("sampling = { max_tokens_cap = 64 }"),
        Some(mock_llm()),
    )
    .await;
    // The server registers its sampling tool once it knows we can sample, and announces it
    // with notifications/tools/list_changed.
    let registry = s.registry.clone();
    eventually("the sampling tool", || {
        registry
            .get("mcp_every_thing_trigger_sampling_request")
            .is_some()
    })
    .await;
    let out = call(
        &s.registry,
        "mcp_every_thing_trigger_sampling_request",
        json!({"prompt": "name a colour", "maxTokens": 1000}),
    )
    .await
    .unwrap();
    assert!(out.contains("echo: Resource"), "{out}");
    assert!(out.contains("name a colour"), "{out}");
    // Counted per server, with the tokens the model reported (the mock counts words), not
    // the 64 the cap allowed.
    let m = &s.metrics;
    let answered = m
        .sampling_requests
        .with_label_values(&["every-thing", "answered"]);
    assert_eq!(answered.get(), 1);
    let output = m
        .sampling_tokens
        .with_label_values(&["every-thing", "output"])
        .get();
    let input = m
        .sampling_tokens
        .with_label_values(&["every-thing", "input"])
        .get();
    let words = |t: &str| t.split_whitespace().count() as u64;
    assert!(
        input > 0 && output > 0 && output < 64,
        "{input} in, {output} out: {out}"
    );
    assert!(output <= words(&out), "{output} out: {out}");
    s.hub.shutdown();

    // Disabled: we do not announce sampling, so the server never offers the tool.
    let s = start_with(
        &everything("sampling = { enabled = false }"),
        Some(mock_llm()),
    )
    .await;
    // The server registers its capability-dependent tools together, the sampling tool among
    // them when it may: once another of them is listed, the sampling tool never will be.
    let registry = s.registry.clone();
    eventually("the capability-dependent tools", || {
        registry
            .get("mcp_every_thing_simulate_research_query")
            .is_some()
    })
    .await;
    assert!(
        s.registry
            .get("mcp_every_thing_trigger_sampling_request")
            .is_none()
    );
    s.hub.shutdown();
}
