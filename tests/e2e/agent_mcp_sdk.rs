//! The official MCP TypeScript SDK as an external agent (`tests/mcp/agent-client.mjs`, the
//! `@modelcontextprotocol/sdk` of tests/mcp, installed by `scripts/test` with `npm ci`):
//! it connects to `/api/mcp/rpc` with `StreamableHTTPClientTransport` and a Bearer key,
//! lists the tools, calls every one, uses the REST alias with `fetch`, and checks that an
//! unlinked key and a REVIEW run's mutations are refused. This test prepares the runs and
//! checks what the fleet did with the agent's answers.

use std::path::PathBuf;
use std::time::Duration;

use hermes::Service;
use hermes_testkit::{count, eventually, rest_inbound, telegram_texts_to};
use hermes_types::agent::EngagementMode;
use hermes_types::envelope::Envelope;
use hermes_types::ids::{AgentId, RunId};
use hermes_types::model::Platform;

use crate::agent_mcp::{assign, env_with, external_agent, key, peer, run_status};

/// Publish a REST message from `sender` and wait until its run is `agent`'s: runs are made
/// one by one so the inbox lists them in this order.
async fn message(
    env: &hermes_testkit::TestEnv,
    bus: &hermes_bus::Bus,
    agent: AgentId,
    sender: &str,
    text: &str,
) -> RunId {
    let run = RunId::new();
    bus.publish(&Envelope::new(run, None, &rest_inbound(sender, text)))
        .await
        .unwrap();
    let db = env.db();
    eventually(Duration::from_secs(30), "the run dispatched", || async {
        let n = count(
            &db,
            "SELECT count(*) FROM agent_runs WHERE id = $1 AND agent_id = $2",
            &[&run.as_uuid(), &agent],
        )
        .await;
        (n == 1).then_some(())
    })
    .await;
    run
}

/// Are node and the SDK of tests/mcp there? Without node the test is skipped (said on
/// stderr); without the SDK it fails: `npm ci` was forgotten.
pub(crate) async fn sdk_installed() -> bool {
    if !crate::node::present().await {
        eprintln!("SKIPPED: node is not installed; the MCP SDK test (tests/mcp) needs it");
        return false;
    }
    assert!(
        mcp_dir()
            .join("node_modules/@modelcontextprotocol/sdk")
            .exists(),
        "run `npm ci` in tests/mcp"
    );
    true
}

fn mcp_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp")
}

/// Run `script` of tests/mcp with `vars`; its stdout, once it ended with success and said
/// "all checks passed".
pub(crate) async fn run_script(script: &str, vars: &[(&str, String)]) -> String {
    let stdout = crate::node::run(&mcp_dir(), script, vars, Duration::from_secs(120)).await;
    assert!(stdout.contains("all checks passed"), "{stdout}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_mcp_sdk_answers_as_an_external_agent() {
    if !sdk_installed().await {
        return;
    }
    let peer = peer().await;
    let env = env_with(&peer).await;
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let rita = external_agent(&env, &peer, "rita", EngagementMode::Review).await;
    let user = env.user(Platform::Rest, "forge-user", 10).await;
    let c = env.db().get().await.unwrap();
    let telegram_chat = hermes_db::users::ChannelScope::from(Platform::Telegram);
    assert!(
        hermes_db::users::link_channel(&c, user.id, telegram_chat, "777", true, None)
            .await
            .unwrap()
    );
    assign(&env, user.id, victor).await;
    let reviewer = env.user(Platform::Rest, "review-user", 10).await;
    assign(&env, reviewer.id, rita).await;
    let (_, victor_key) = key(&env, Some(victor)).await;
    let (_, rita_key) = key(&env, Some(rita)).await;
    let (_, unlinked_key) = key(&env, None).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    let mut runs = Vec::new();
    for i in 1..=4 {
        runs.push(message(&env, &bus, victor, "forge-user", &format!("message {i}")).await);
    }
    let review_run = message(&env, &bus, rita, "review-user", "review this").await;

    let stdout = run_script(
        "agent-client.mjs",
        &[
            ("HERMES_MCP_URL", fleet.url("/api/mcp")),
            ("HERMES_AGENT_KEY", victor_key.clone()),
            ("HERMES_REVIEW_KEY", rita_key.clone()),
            ("HERMES_UNLINKED_KEY", unlinked_key.clone()),
            ("HERMES_OTHER_CHAT", "777".into()),
        ],
    )
    .await;
    assert_eq!(stdout.matches("ok - ").count(), 10, "{stdout}");

    // What the fleet made of it: three answers, one failure, the REVIEW run's own reply.
    let want = [
        (runs[0], "completed"),
        (runs[1], "completed"),
        (runs[2], "failed"),
        (runs[3], "completed"),
        (review_run, "completed"),
    ];
    for (run, status) in want {
        let id = run.to_string();
        eventually(Duration::from_secs(30), "the run closed", || async {
            (run_status(&env, &id).await == status).then_some(())
        })
        .await;
    }
    let output: String = c
        .query_one(
            "SELECT output_text FROM agent_runs WHERE id = $1",
            &[&runs[1].as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(output, "draft answer");
    eventually(
        Duration::from_secs(30),
        "the note in the other chat",
        || async {
            (telegram_texts_to(&peer, "777").await == ["a note for your other chat"]).then_some(())
        },
    )
    .await;
    let refunds = count(
        &env.db(),
        "SELECT count(*) FROM credit_ledger WHERE reason = 'refund'",
        &[],
    )
    .await;
    assert_eq!(refunds, 1, "only the failed run is refunded");
    let remembered = count(
        &env.db(),
        "SELECT count(*) FROM user_memory WHERE user_id = $1 AND key = 'home_city' AND value = 'Lisbon'",
        &[&user.id],
    )
    .await;
    assert_eq!(remembered, 1);
    bus.close().await;
    fleet.stop().await.unwrap();
}
