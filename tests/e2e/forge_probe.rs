//! The Forge contract's dispatcher side, item 9 (docs/agents.md, "Probing an agent's
//! runtime"): `hermes agents probe <profileKey>` runs the contract's diagnostics against a
//! fake runtime, `GET /v1/models` with its bearer and `GET /v1/runs` expecting 405, reports
//! each, and leaves the agent's presence alone.

use hermes_testkit::TestEnv;
use hermes_types::agent::EngagementMode;
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::agent_mcp::{env_with, external_agent, peer};

/// The runtime's bearer.
const BEARER: &str = "runtime-bearer-0123456789";

/// A fake runtime: models for the right bearer only, and `/v1/runs` answering `runs_status`
/// to GET.
async fn runtime(runs_status: u16) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("authorization", format!("Bearer {BEARER}").as_str()))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"object": "list", "data": [{"id": "hermes-agent"}]})),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/runs"))
        .respond_with(ResponseTemplate::new(runs_status))
        .mount(&server)
        .await;
    server
}

/// victor's status and whether it was ever heard from.
async fn presence(env: &TestEnv) -> (String, bool) {
    let c = env.db().get().await.unwrap();
    let row = c
        .query_one(
            "SELECT status, last_heartbeat_at IS NOT NULL FROM agents WHERE profile_key = 'victor'",
            &[],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_9_the_probe_checks_models_with_the_bearer_and_runs_for_405_without_marking_presence()
{
    let peer = peer().await;
    let env = env_with(&peer).await;
    external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let c = env.db().get().await.unwrap();
    c.execute(
        "UPDATE agents SET status = 'OFFLINE' WHERE profile_key = 'victor'",
        &[],
    )
    .await
    .unwrap();
    let before = presence(&env).await;

    let healthy = runtime(405).await;
    let base = healthy.uri();
    let probe = [
        "agents",
        "probe",
        "victor",
        "--base-url",
        base.as_str(),
        "--token-stdin",
    ];
    let (code, out, err) = env.hermes_with_stdin(&probe, BEARER).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("ok    GET /v1/models"), "{out}");
    assert!(out.contains("1 models"), "{out}");
    assert!(out.contains("ok    GET /v1/runs"), "{out}");
    let asked: Vec<_> = healthy.received_requests().await.unwrap();
    assert!(
        asked.iter().all(|r| r.method.as_str() == "GET"),
        "nothing is started"
    );
    assert_eq!(asked.len(), 2);

    // Without the bearer, and against a runtime with no runs route: each failure reported.
    let broken = runtime(404).await;
    let base = broken.uri();
    let (code, out, _) = env
        .hermes(&["agents", "probe", "victor", "--base-url", base.as_str()])
        .await;
    assert_ne!(code, 0, "{out}");
    let reported = |check: &str, status: &str| {
        out.lines()
            .any(|l| l.contains("FAIL") && l.contains(check) && l.contains(status))
    };
    assert!(reported("GET /v1/models", "401"), "{out}");
    assert!(reported("GET /v1/runs", "404"), "{out}");

    assert_eq!(
        presence(&env).await,
        before,
        "the agent is not marked present"
    );
    assert_eq!(before.0, "OFFLINE");
}
