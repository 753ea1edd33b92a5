//! What a Forge may cost Hermes (docs/security.md, "Forge wakes"): wakes are limited per
//! secret (`HERMES_FORGE_WAKES_PER_MINUTE`), and the model calls of Forge runs are metered
//! per workspace and per UTC day (`HERMES_FORGE_DAILY_TOKENS`): a workspace past its budget
//! gets failed runs, another workspace is untouched.

use hermes::Service;
use hermes_testkit::{TestEnv, metric};
use hermes_types::agent::AgentKind;
use serde_json::{Value, json};

use crate::fake_forge::FakeForge;
use crate::forge_wakes::{SECRET, agent, forge_env, now, signed, wake};

/// Another secret the Forge signs with (both are listed).
const OTHER: &str = "forge-secret-second-0123456789abcdef";

/// A wake for `profile_key` about `issue`: each wake its own content (a wake whose signed
/// content was taken before is a replay).
fn envelope(profile_key: &str, workspace: &str, issue: &str) -> Value {
    json!({
        "kind": "AGENT_ASSIGNED",
        "workspace": {"slug": workspace},
        "agent": {"profileKey": profile_key},
        "issue": {"id": issue, "key": issue, "title": "Look at the login page"},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wakes_are_limited_per_secret() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_FORGE_WEBHOOK_SECRETS", &format!("{SECRET},{OTHER}"))
        .set("HERMES_FORGE_WAKES_PER_MINUTE", "2");
    agent(&env, "default", "victor", AgentKind::Internal).await;
    let fleet = env.start(&[Service::Ingest]).await;
    let send = |secret: &'static str, delivery: &'static str| {
        let body = envelope("victor", "default", delivery).to_string();
        let fleet = &fleet;
        async move {
            let b = body.as_bytes();
            fleet
                .forge_wake(b, &signed(secret, now(), delivery, b))
                .await
        }
    };
    for delivery in ["dlv_1", "dlv_2"] {
        let resp = send(SECRET, delivery).await;
        assert_eq!(resp.status(), 202, "{delivery}");
    }
    // The third within the minute: refused, nothing queued, told when to come back.
    let resp = send(SECRET, "dlv_3").await;
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().contains_key("retry-after"));
    let error: Value = resp.json().await.unwrap();
    assert_eq!(error["error"]["code"], "rate_limited");
    // The other secret has a rate of its own.
    let resp = send(OTHER, "dlv_4").await;
    assert_eq!(resp.status(), 202);
    let m = fleet.metrics().await;
    assert_eq!(
        metric(&m, "hermes_forge_wakes_total{outcome=\"rate_limited\"}"),
        Some(1.0)
    );
    assert_eq!(
        metric(&m, "hermes_forge_wakes_total{outcome=\"queued\"}"),
        Some(3.0)
    );
    fleet.stop().await.unwrap();
}

/// The run a wake became, once it closed: (status, error code).
async fn closed(env: &TestEnv, resp: reqwest::Response) -> (String, Option<String>) {
    let (status, code, _) = crate::forge_agent::closed(env, resp).await;
    (status, code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspaces_forge_runs_stop_at_its_daily_budget_and_another_workspace_goes_on() {
    // The Forge whose inbox holds the three runs (Hermes lists, acknowledges and reads each
    // before the model is called: docs/agents.md, "The loop, enforced").
    let forge = FakeForge::new();
    for issue in ["AXI-1", "AXI-2", "AXI-3"] {
        forge.assign(&format!("run_{issue}"), issue);
    }
    let forge_server = forge.serve().await;
    let mut env = TestEnv::new().await;
    let config = std::env::temp_dir().join(format!("{}-forge-limits.toml", env.ns));
    std::fs::write(
        &config,
        format!(
            "[mcp_servers.forge]\nurl = \"{}/api/mcp/rpc\"\ntimeout = 10\n",
            forge_server.uri()
        ),
    )
    .unwrap();
    forge_env(&mut env)
        .set("HERMES_FORGE_DAILY_TOKENS", "1")
        .set("HERMES_CONFIG", config.to_str().unwrap());
    env.db()
        .get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO workspaces (slug, name) VALUES ('other', 'Other')",
            &[],
        )
        .await
        .unwrap();
    agent(&env, "default", "victor", AgentKind::Internal).await;
    agent(&env, "other", "mizu", AgentKind::Internal).await;
    let fleet = env.start(&Service::ALL).await;
    crate::forge_agent::forge_tools_published(&env, 9).await;

    // The first run is answered (nothing used yet); its tokens are the day's.
    let first = wake(&fleet, &envelope("victor", "default", "AXI-1"), "dlv_a").await;
    assert_eq!(closed(&env, first).await, ("completed".into(), None));
    let used: i64 = env
        .db()
        .get()
        .await
        .unwrap()
        .query_one(
            "SELECT u.tokens FROM llm_forge_usage u JOIN workspaces w ON w.id = u.workspace_id
             WHERE w.slug = 'default' AND u.day = (now() AT TIME ZONE 'UTC')::date",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(used > 0, "the run's tokens were counted");
    // The next run of that workspace is refused before any model call.
    let second = wake(&fleet, &envelope("victor", "default", "AXI-2"), "dlv_b").await;
    assert_eq!(
        closed(&env, second).await,
        ("failed".into(), Some("budget_exceeded".into()))
    );
    // Another workspace's Forge runs have their own day.
    let other = wake(&fleet, &envelope("mizu", "other", "AXI-3"), "dlv_c").await;
    assert_eq!(closed(&env, other).await, ("completed".into(), None));
    let m = fleet.metrics().await;
    assert_eq!(
        metric(
            &m,
            "hermes_llm_budget_rejections_total{scope=\"forge_daily\"}"
        ),
        Some(1.0),
        "{m}"
    );
    fleet.stop().await.unwrap();
}
