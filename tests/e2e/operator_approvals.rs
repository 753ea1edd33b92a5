//! Approvals answered over MCP (docs/operator-mcp.md, approvals): a fake model asks for the
//! gated `current_time`; an operator's client built on the official MCP SDK
//! (`tests/mcp/operator-approvals.mjs`, over `POST /mcp`) waits for the `approval_requested`
//! event, finds the call with `permissions_list_open` and allows or denies it with
//! `permissions_respond`, or only watches it time out; the run then finishes with the
//! model's answer, having run the tool once or never.

use hermes_testkit::KEY;

use crate::agent_mcp_sdk::{run_script, sdk_installed};
use crate::approvals::{Gated, completed, tool_turn};

/// Run the SDK client in `mode` against a gated run started with `vars`, and return the
/// tool turn the model got once the run completed.
async fn answered_over_mcp(
    mode: &str,
    vars: &[(&str, &str)],
) -> Option<(serde_json::Value, Option<f64>)> {
    if !sdk_installed().await {
        return None;
    }
    let t = Gated::start(vars).await;
    let stdout = run_script(
        "operator-approvals.mjs",
        &[
            ("HERMES_MCP_URL", t.fleet.url("/mcp")),
            ("HERMES_OPERATOR_KEY", KEY.to_string()),
            ("HERMES_RUN_ID", t.run.to_string()),
            ("HERMES_MODE", mode.to_string()),
        ],
    )
    .await;
    assert!(stdout.contains("ok - approval_requested"), "{stdout}");
    completed(&t.db, t.run).await;
    let turn = tool_turn(&t.provider).await;
    let ran = t.tool_ran().await;
    t.stop().await;
    Some((turn, ran))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_allowed_over_mcp_runs_once_and_the_run_finishes() {
    let Some((turn, ran)) = answered_over_mcp("allow", &[]).await else {
        return;
    };
    assert!(turn.get("refused").is_none(), "the tool ran: {turn}");
    assert_eq!(ran, Some(1.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_denied_over_mcp_reaches_the_model_as_a_denial() {
    let Some((turn, ran)) = answered_over_mcp("deny", &[]).await else {
        return;
    };
    assert_eq!(turn["denied"], true, "{turn}");
    assert_eq!(turn["verdict"], "denied", "{turn}");
    assert_eq!(turn["operator_reason"], "the operator said deny", "{turn}");
    assert_eq!(ran, None, "never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_nobody_answers_is_seen_over_mcp_to_time_out() {
    let vars = [
        ("HERMES_APPROVAL_TIMEOUT", "2s"),
        ("HERMES_APPROVAL_SWEEP_SECS", "1"),
    ];
    let Some((turn, ran)) = answered_over_mcp("timeout", &vars).await else {
        return;
    };
    assert_eq!(turn["verdict"], "timed_out", "{turn}");
    assert_eq!(ran, None, "never ran");
}
