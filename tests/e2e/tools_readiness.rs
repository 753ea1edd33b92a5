//! The tools stage is not ready before its MCP servers' first discovery is in the registry
//! (docs/tools-and-mcp.md, "The registry"): a message routed once the process is ready is
//! offered a slow-starting server's tools, and a server that never starts holds readiness
//! only for `HERMES_TOOLS_READY_TIMEOUT`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_testkit::{RealProcess, TestEnv, count, eventually, everything_server_js};
use serde_json::json;

/// A configuration whose `slow` server is the reference server started only once `gate`
/// exists: the test decides when the server comes up, so nothing depends on timing. The
/// waiting shell ends with its parent, so a killed `hermes` leaves nothing behind.
fn gated_config(env: &TestEnv, gate: &Path) -> PathBuf {
    let script = format!(
        "until [ -e '{}' ]; do kill -0 $PPID 2>/dev/null || exit 1; sleep 0.05; done; \
         exec node '{}' stdio",
        gate.display(),
        everything_server_js().display()
    );
    let toml = format!(
        "[mcp_servers.slow]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\nconnect_timeout = 600\n"
    );
    let file = std::env::temp_dir().join(format!("{}-gated-mcp.toml", env.ns));
    std::fs::write(&file, toml).unwrap();
    file
}

/// How many of the slow server's tools the registry holds.
async fn slow_tools(env: &TestEnv) -> i64 {
    count(
        &env.db(),
        "SELECT count(*) FROM tool_registry WHERE toolset = 'mcp-slow'",
        &[],
    )
    .await
}

/// Wait until the process answers `/readyz` with nothing pending but `step`.
async fn held_by(tools: &RealProcess, step: &str) -> u16 {
    eventually(
        Duration::from_secs(30),
        "readiness held by the MCP discovery alone",
        || async {
            let (status, body) = tools.readiness().await?;
            (body["checks"]["starting"] == json!([step])
                && body["checks"]["postgres"] == true
                && body["checks"]["rabbitmq"] == true)
                .then_some(status)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tools_stage_is_ready_only_once_a_slow_servers_tools_are_published() {
    let mut env = TestEnv::new().await;
    let gate = std::env::temp_dir().join(format!("{}-gate", env.ns));
    let config = gated_config(&env, &gate);
    env.set("HERMES_CONFIG", config.to_str().unwrap())
        .set("HERMES_TOOLS_READY_TIMEOUT", "10m");
    let tools = env.spawn("tools");
    // Up and connected, the built-ins published, the server not started: not ready.
    assert_eq!(held_by(&tools, "mcp_servers").await, 503);
    assert_eq!(slow_tools(&env).await, 0, "the gate holds the server back");

    std::fs::write(&gate, b"").unwrap();
    tools.wait_ready(Duration::from_secs(60)).await;
    // Ready means published: a message routed now is offered the server's tools.
    assert!(
        slow_tools(&env).await > 0,
        "the server's tools are published"
    );
    let named = count(
        &env.db(),
        "SELECT count(*) FROM tool_registry WHERE name = 'mcp_slow_get_sum'",
        &[],
    )
    .await;
    assert_eq!(named, 1);
    let _ = std::fs::remove_file(&gate);
    let _ = std::fs::remove_file(&config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_starts_holds_readiness_only_for_the_bound() {
    let mut env = TestEnv::new().await;
    // The gate is never opened: the server never answers.
    let gate = std::env::temp_dir().join(format!("{}-never", env.ns));
    let config = gated_config(&env, &gate);
    env.set("HERMES_CONFIG", config.to_str().unwrap())
        .set("HERMES_TOOLS_READY_TIMEOUT", "2s");
    let tools = env.spawn("tools");
    tools.wait_ready(Duration::from_secs(30)).await;
    assert_eq!(slow_tools(&env).await, 0);
    let _ = std::fs::remove_file(&config);
}
