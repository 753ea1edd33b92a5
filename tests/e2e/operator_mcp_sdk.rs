//! The operator MCP server with real clients: the official MCP TypeScript SDK
//! (`tests/mcp/operator-client.mjs`) over stdio, spawning the built `hermes mcp serve` with
//! this test's configuration, and over streamable HTTP at `/mcp`; and the stdio transport
//! by hand: nothing but protocol on stdout, a clean exit when stdin ends.

use std::process::Stdio;
use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys::KeyScope;
use hermes_testkit::{TestEnv, hermes_bin};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::agent_mcp::{env_with, peer};
use crate::agent_mcp_sdk::{run_script, sdk_installed};
use crate::operator_mcp::{conversations, key_with, waiting_calls};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_mcp_sdk_operates_over_stdio_and_http() {
    if !sdk_installed().await {
        return;
    }
    let bin = hermes_bin();
    let peer = peer().await;
    let env = env_with(&peer).await;
    let (_, op_key) = key_with(&env, &[KeyScope::Operator]).await;
    let fleet = env.start(&Service::ALL).await;
    conversations(&env, &fleet, &[(4242, "the SDK")]).await;
    let ids = waiting_calls(&env, "4242", 2).await;

    let stdout = run_script(
        "operator-client.mjs",
        &[
            ("HERMES_BIN", bin.display().to_string()),
            ("HERMES_ENV", serde_json::to_string(&env.vars).unwrap()),
            ("HERMES_MCP_URL", fleet.url("/mcp")),
            ("HERMES_OPERATOR_KEY", op_key.clone()),
            ("HERMES_APPROVALS", json!(ids).to_string()),
        ],
    )
    .await;
    assert_eq!(stdout.matches("ok - ").count(), 8, "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_answers_each_line_writes_only_protocol_and_exits_at_the_end_of_input() {
    let env = TestEnv::new().await;
    let mut child = tokio::process::Command::new(hermes_bin())
        .args(["mcp", "serve"])
        .env_clear()
        .envs(&env.vars)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": { "protocolVersion": "2024-11-05", "capabilities": {},
                            "clientInfo": { "name": "t", "version": "0" } } })
        .to_string(),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }).to_string(),
        String::new(),
        "{broken".to_string(),
        // Longer than a line may be: refused and skipped, the next line read as usual.
        format!(
            "{{\"pad\": \"{}\"}}",
            "x".repeat(hermes_operator::stdio::MAX_LINE)
        ),
        json!({ "jsonrpc": "2.0", "id": "c", "method": "tools/call",
                "params": { "name": "permissions_list_open", "arguments": {} } })
        .to_string(),
    ];
    stdin
        .write_all(format!("{}\n", lines.join("\n")).as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the server exits when stdin ends")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let answers: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("every stdout line is a JSON-RPC message"))
        .collect();
    assert_eq!(answers.len(), 4, "{answers:?}");
    let by_id = |id: Value| answers.iter().find(|a| a["id"] == id).cloned();
    let init = by_id(json!(1)).expect("initialize answered");
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(init["result"]["serverInfo"]["name"], "hermes-operator");
    let listed = by_id(json!("c")).expect("the call answered");
    assert_eq!(
        listed["result"]["structuredContent"],
        json!({ "approvals": [] })
    );
    let mut faults: Vec<i64> = answers
        .iter()
        .filter(|a| a["id"].is_null())
        .filter_map(|a| a["error"]["code"].as_i64())
        .collect();
    faults.sort_unstable();
    assert_eq!(faults, [-32700, -32600], "the broken and the overlong line");
    assert!(
        !stderr.contains(" INFO "),
        "only warnings without --verbose: {stderr}"
    );
}
