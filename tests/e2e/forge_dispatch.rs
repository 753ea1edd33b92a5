//! The Forge contract's dispatcher side, items 4 and 5 (docs/agents.md, "The contract, item by
//! item"): a pull-only agent (the contract's Claude/Codex case) and BUSY pausing the
//! dispatcher for an agent, explicit assignments included. Helpers are the conformance
//! suite's (`forge_contract`).

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{TestEnv, count, eventually, metric};
use hermes_types::agent::EngagementMode;
use hermes_types::ids::{AgentId, RunId};
use hermes_types::model::Platform;
use serde_json::{Value, json};

use crate::agent_mcp::{Mcp, assign, env_with, external_agent, key, peer};
use crate::forge_contract::{closed_as, listed, message, wake, wakes_of};

/// The agent a run was dispatched to, its dispatch record and whether it is held, once the
/// router committed it.
async fn routed(env: &TestEnv, run: RunId) -> (AgentId, Value, bool) {
    eventually(Duration::from_secs(30), "the run routed", || async {
        let c = env.db().get().await.ok()?;
        let row = c
            .query_opt(
                "SELECT agent_id, dispatch, held_at IS NOT NULL FROM agent_runs
                 WHERE id = $1 AND dispatch IS NOT NULL",
                &[&run],
            )
            .await
            .ok()??;
        Some((row.get::<_, Option<AgentId>>(0)?, row.get(1), row.get(2)))
    })
    .await
}

/// Wakes owed for `run` (rows written with the dispatch, before anything is sent).
async fn wakes_owed(env: &TestEnv, run: RunId) -> i64 {
    let id = run.as_uuid();
    count(
        &env.db(),
        "SELECT count(*) FROM webhook_deliveries WHERE run_id = $1",
        &[&id],
    )
    .await
}

/// The run ids `mcp`'s inbox lists, unacknowledged and acknowledged.
async fn inbox_ids(mcp: &Mcp) -> Vec<Value> {
    let listed = mcp.ok("agent.inbox.list", json!({"status": "all"})).await;
    listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runId"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_4_a_pull_only_agent_is_never_woken_pulls_its_inbox_and_its_runs_expire() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let create = [
        "agents",
        "create",
        "claude",
        "--kind",
        "external",
        "--name",
        "Claude",
        "--pull-only",
    ];
    let (code, out, err) = env.hermes(&create).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("whsec_"), "nothing to sign, no secret: {out}");
    let (code, out, _) = env.hermes(&["agents", "show", "claude"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("pull-only"), "{out}");
    let c = env.db().get().await.unwrap();
    let claude: AgentId = c
        .query_one(
            "SELECT id FROM agents WHERE profile_key = 'claude' AND webhook_url IS NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    // Silent for an hour: OFFLINE until it says it is there.
    c.execute(
        "UPDATE agents SET last_heartbeat_at = now() - interval '1 hour', status = 'OFFLINE'
         WHERE id = $1",
        &[&claude],
    )
    .await
    .unwrap();
    let user = env.user(Platform::Rest, "pull-user", 10).await;
    assign(&env, user.id, claude).await;
    let (_, agent_key) = key(&env, Some(claude)).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    let mcp = Mcp::new(&fleet, &agent_key);

    // Present through `agents.heartbeat`, as the contract's single-session clients are.
    let beat = mcp
        .ok("agents.heartbeat", json!({"status": "ONLINE"}))
        .await;
    assert_eq!(beat["status"], "ONLINE");
    let me = mcp.ok("agents.me", json!({})).await;
    assert!(me["lastHeartbeatAt"].is_string(), "{me}");

    // The run is in its inbox, pulled; it is never woken.
    let first = message(&bus, Platform::Rest, "pull-user", "first", Vec::new()).await;
    let run = listed(&mcp, first).await;
    assert_eq!(run["wakes"], 0, "{run}");
    assert!(run["deadlineAt"].is_string(), "{run}");
    mcp.ok("agent.inbox.ack", json!({"runId": first})).await;
    mcp.ok(
        "chat.appendMessage",
        json!({"threadId": first, "body": "pulled and answered"}),
    )
    .await;
    closed_as(&env, first, "completed").await;

    // Its runs end by the reply deadline like any other external run's.
    let (code, _, err) = env
        .hermes(&["agents", "set", "claude", "--reply-deadline", "2s"])
        .await;
    assert_eq!(code, 0, "{err}");
    let second = message(&bus, Platform::Rest, "pull-user", "second", Vec::new()).await;
    listed(&mcp, second).await;
    closed_as(&env, second, "expired").await;

    for run in [first, second] {
        assert_eq!(wakes_owed(&env, run).await, 0, "no wake is owed");
    }
    assert!(
        wakes_of(&peer, first).await.is_empty() && wakes_of(&peer, second).await.is_empty(),
        "nothing was POSTed"
    );
    drop(c);
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_5_busy_holds_an_assignment_until_online_and_the_deadline_bounds_the_wait() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Rest, "busy-user", 10).await;
    assign(&env, user.id, victor).await;
    let (_, agent_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    let mcp = Mcp::new(&fleet, &agent_key);

    // BUSY, as the contract says, through the heartbeat.
    let beat = mcp.ok("agents.heartbeat", json!({"status": "BUSY"})).await;
    assert_eq!(beat["status"], "BUSY");
    let held = message(&bus, Platform::Rest, "busy-user", "while busy", Vec::new()).await;
    let (agent, dispatch, is_held) = routed(&env, held).await;
    assert_eq!(agent, victor);
    assert!(is_held, "the run waits for its agent");
    assert_eq!(dispatch["mode"], "ASSIGNED");
    assert!(
        dispatch["reason"]
            .as_str()
            .is_some_and(|r| r.contains("held while the agent is BUSY")),
        "{dispatch}"
    );
    // Not sent to the BUSY agent: no wake owed, not in its inbox.
    assert_eq!(wakes_owed(&env, held).await, 0);
    assert!(!inbox_ids(&mcp).await.contains(&json!(held)));

    // ONLINE again: the held run is woken and listed.
    mcp.ok("agents.heartbeat", json!({"status": "ONLINE"}))
        .await;
    let woken = wake(&peer, held).await;
    let body: Value = serde_json::from_slice(&woken.body).unwrap();
    assert_eq!(body["issue"]["id"], json!(held));
    listed(&mcp, held).await;
    mcp.ok("agent.inbox.ack", json!({"runId": held})).await;
    mcp.ok(
        "chat.appendMessage",
        json!({"threadId": held, "body": "back now"}),
    )
    .await;
    closed_as(&env, held, "completed").await;

    // OFFLINE, and the wait is bounded by the reply deadline: expired, never woken.
    let (code, _, err) = env
        .hermes(&[
            "agents",
            "set",
            "victor",
            "--status",
            "OFFLINE",
            "--reply-deadline",
            "2s",
        ])
        .await;
    assert_eq!(code, 0, "{err}");
    let waited = message(&bus, Platform::Rest, "busy-user", "while away", Vec::new()).await;
    let (_, dispatch, is_held) = routed(&env, waited).await;
    assert!(is_held, "{dispatch}");
    closed_as(&env, waited, "expired").await;
    assert_eq!(wakes_owed(&env, waited).await, 0, "never sent to it");
    assert!(wakes_of(&peer, waited).await.is_empty());

    let m = fleet.metrics().await;
    assert_eq!(
        metric(
            &m,
            r#"hermes_agent_held_runs_total{agent="victor",outcome="held"}"#
        ),
        Some(2.0),
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            r#"hermes_agent_held_runs_total{agent="victor",outcome="released"}"#
        ),
        Some(1.0)
    );
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_5_with_fallback_an_assignment_to_a_busy_or_offline_agent_goes_elsewhere() {
    let peer = peer().await;
    let mut env = env_with(&peer).await;
    env.set("HERMES_AGENT_PAUSED_ASSIGNMENTS", "fallback");
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let mizu = external_agent(&env, &peer, "mizu", EngagementMode::Execute).await;
    let user = env.user(Platform::Rest, "fallback-user", 10).await;
    assign(&env, user.id, victor).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;

    for status in ["BUSY", "OFFLINE"] {
        let (code, _, err) = env
            .hermes(&["agents", "set", "victor", "--status", status])
            .await;
        assert_eq!(code, 0, "{err}");
        // A mention of the paused agent does not reach it either.
        let run = message(
            &bus,
            Platform::Rest,
            "fallback-user",
            "@victor are you there?",
            Vec::new(),
        )
        .await;
        let (agent, dispatch, is_held) = routed(&env, run).await;
        assert_eq!(agent, mizu, "{status}: {dispatch}");
        assert!(!is_held);
        assert_eq!(dispatch["mode"], "ROUND_ROBIN");
        assert_eq!(
            dispatch["reason"],
            format!("assigned agent victor is {status}: round-robin")
        );
        let woken = wake(&peer, run).await;
        let body: Value = serde_json::from_slice(&woken.body).unwrap();
        assert_eq!(body["agent"]["profileKey"], "mizu");
        let to_victor = count(
            &env.db(),
            "SELECT count(*) FROM webhook_deliveries WHERE run_id = $1 AND agent_id = $2",
            &[&run, &victor],
        )
        .await;
        assert_eq!(to_victor, 0, "never sent to a {status} agent");
    }
    bus.close().await;
    fleet.stop().await.unwrap();
}
