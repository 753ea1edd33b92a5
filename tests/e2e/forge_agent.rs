//! Hermes as the runtime a Forge wakes, to the letter of the contract (docs/agents.md, "The
//! contract, item by item", items 10 to 12), against a fake Forge written from the
//! contract's text ([`crate::fake_forge`]): the loop is Hermes's own step, not the model's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes::Service;
use hermes_testkit::{Fleet, TestEnv, eventually};
use hermes_types::agent::AgentKind;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::fake_forge::FakeForge;
use crate::forge_loop::{tool_call, user_turn};
use crate::forge_wakes::{agent, forge_env, wake};

/// The Bearer key Hermes presents to the fake Forge.
const FORGE_KEY: &str = "forge_sk_live_victor";

/// The contract's wake for `victor` on issue `issue` (no Hermes field: a Forge sends these).
pub(crate) fn contract_wake(kind: &str, issue: &str) -> Value {
    let mut wake = json!({
        "kind": kind,
        "workspace": {"id": "wks_axi", "slug": "axiom", "key": "AXI"},
        "agent": {"id": "agt_victor", "profileKey": "victor"},
        "issue": {"id": issue, "key": "AXI-42", "title": "Review the login page"},
        "dispatch": {"mode": "ROUND_ROBIN", "chosen": "agt_victor", "reason": "round-robin"},
    });
    if kind == "CHAT_MESSAGE_POSTED" {
        wake["threadId"] = json!(format!("thr_{issue}"));
    }
    wake
}

/// A fleet whose `[mcp_servers.forge]` is `forge` (with [`FORGE_KEY`]) and whose model is
/// `provider`, with the internal agent `victor`; the fleet once the Forge's tools are known.
pub(crate) async fn fleet_with(
    forge: &MockServer,
    provider: &MockServer,
    tools: usize,
) -> (TestEnv, Fleet) {
    let env = forge_agent_env(forge, &provider.uri()).await;
    let fleet = env.start(&Service::ALL).await;
    forge_tools_published(&env, tools).await;
    (env, fleet)
}

/// The environment of [`fleet_with`] with the model at `model` (a base URL), not started.
pub(crate) async fn forge_agent_env(forge: &MockServer, model: &str) -> TestEnv {
    let mut env = TestEnv::new().await;
    forge_config(&mut env, forge, FORGE_KEY);
    forge_env(&mut env)
        .openai_mock(&format!("{model}/v1"))
        .set("HERMES_MODEL", "gpt-test");
    agent(&env, "default", "victor", AgentKind::Internal).await;
    env
}

/// Point `env`'s configuration file at `forge` as `[mcp_servers.forge]`, presenting `key`
/// (fleets started after this use it).
pub(crate) fn forge_config(env: &mut TestEnv, forge: &MockServer, key: &str) {
    let config = std::env::temp_dir().join(format!("{}-forge-agent-{key}.toml", env.ns));
    std::fs::write(
        &config,
        format!(
            "[mcp_servers.forge]\nurl = \"{}/api/mcp/rpc\"\nheaders = {{ Authorization = \"Bearer {key}\" }}\ntimeout = 10\n",
            forge.uri(),
        ),
    )
    .unwrap();
    env.set("HERMES_CONFIG", config.to_str().unwrap());
}

/// The run a wake became, once it closed: (status, error code, error detail).
pub(crate) async fn closed(
    env: &TestEnv,
    resp: reqwest::Response,
) -> (String, Option<String>, Option<String>) {
    assert_eq!(resp.status(), 202, "{:?}", resp.text().await);
    let taken: Value = resp.json().await.unwrap();
    let run: uuid::Uuid = taken["run_id"].as_str().unwrap().parse().unwrap();
    let db = env.db();
    eventually(Duration::from_secs(60), "the Forge run closed", || async {
        let row = db
            .get()
            .await
            .ok()?
            .query_opt(
                "SELECT status, error_code, error_detail FROM agent_runs WHERE id = $1",
                &[&run],
            )
            .await
            .ok()??;
        let status: String = row.get(0);
        matches!(status.as_str(), "completed" | "failed").then(|| (status, row.get(1), row.get(2)))
    })
    .await
}

/// Wait until the tools stage published `n` tools of the Forge's MCP server.
pub(crate) async fn forge_tools_published(env: &TestEnv, n: usize) {
    let db = env.db();
    eventually(
        Duration::from_secs(30),
        "the Forge's tools published",
        || async {
            let published = hermes_testkit::count(
                &db,
                "SELECT count(*) FROM tool_registry WHERE toolset = 'mcp-forge'",
                &[],
            )
            .await;
            (published == n as i64).then_some(())
        },
    )
    .await;
}

/// Wake `victor` with `envelope`; the run's (status, error code, error detail) once closed.
pub(crate) async fn run_closed(
    env: &TestEnv,
    fleet: &Fleet,
    envelope: &Value,
    delivery: &str,
) -> (String, Option<String>, Option<String>) {
    closed(env, wake(fleet, envelope, delivery).await).await
}

/// The model requests `provider` received.
pub(crate) async fn model_requests(provider: &MockServer) -> Vec<Value> {
    provider
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_10_hermes_lists_acks_and_reads_the_bundle_before_the_model_acts() {
    let forge = FakeForge::new();
    forge.assign("run_other", "iss_other");
    forge.assign("run_42", "iss_42");
    let forge_server = forge.serve().await;
    // The model answers in the thread once, then ends; each request notes what the Forge had
    // been asked by then.
    let seen: Arc<Mutex<Vec<Vec<String>>>> = Arc::default();
    let provider = MockServer::start().await;
    let (f, s) = (forge.clone(), seen.clone());
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(move |req: &Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            s.lock().unwrap().push(f.tools_called());
            let acted = body["messages"]
                .as_array()
                .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
            let answer = if acted {
                hermes_testkit::openai_answer("done", 10, 2)
            } else {
                tool_call(
                    "mcp_forge_chat_appendMessage",
                    json!({"threadId": "iss_42", "body": "On it."}),
                    0,
                )
            };
            ResponseTemplate::new(200).set_body_json(answer)
        })
        .mount(&provider)
        .await;
    let (env, fleet) = fleet_with(&forge_server, &provider, 9).await;

    let closed = run_closed(
        &env,
        &fleet,
        &contract_wake("AGENT_ASSIGNED", "iss_42"),
        "dlv_10",
    )
    .await;
    assert_eq!(closed, ("completed".into(), None, None));
    let calls = forge.run_calls();
    let steps: Vec<(&str, &Value)> = calls
        .iter()
        .map(|c| (c.tool.as_str(), &c.arguments))
        .collect();
    assert_eq!(
        steps,
        [
            ("agent.inbox.list", &json!({"status": "unacked"})),
            ("agent.inbox.ack", &json!({"runId": "run_42"})),
            ("agent.context.bundle", &json!({"issueId": "iss_42"})),
            (
                "chat.appendMessage",
                &json!({"threadId": "iss_42", "body": "On it."})
            ),
        ]
    );
    assert!(
        calls
            .iter()
            .all(|c| c.authorization.as_deref() == Some(&format!("Bearer {FORGE_KEY}")))
    );
    // The three calls were made before the model's first request, and the bundle is in it.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "one action, then the answer");
    assert_eq!(
        seen[0],
        [
            "agent.inbox.list",
            "agent.inbox.ack",
            "agent.context.bundle"
        ]
    );
    let asked = model_requests(&provider).await;
    let turn = user_turn(&asked[0]);
    assert!(
        turn.contains("BUNDLE-OF-iss_42: check the redirect"),
        "{turn}"
    );
    assert!(turn.contains("acknowledged run run_42"), "{turn}");
    let system = asked[0]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("Do not list or acknowledge again"),
        "{system}"
    );

    // A wake whose run is not in the unacked inbox fails without a model call or an ack.
    let before = forge.run_calls().len();
    let closed = run_closed(
        &env,
        &fleet,
        &contract_wake("AGENT_ASSIGNED", "iss_gone"),
        "dlv_11",
    )
    .await;
    assert_eq!(closed.0, "failed");
    assert_eq!(closed.1.as_deref(), Some("forge_loop_failed"));
    let detail = closed.2.unwrap_or_default();
    assert!(
        detail.contains("no run of this wake (issue iss_gone"),
        "{detail}"
    );
    let after: Vec<String> = forge.tools_called()[before..].to_vec();
    assert_eq!(after, ["agent.inbox.list"]);
    assert_eq!(model_requests(&provider).await.len(), 2, "no model call");
    // A second wake of the run already acknowledged finds it no longer unacked either.
    let mut again = contract_wake("AGENT_ASSIGNED", "iss_42");
    again["dispatch"]["reason"] = json!("re-assigned");
    let closed = run_closed(&env, &fleet, &again, "dlv_12").await;
    assert_eq!(closed.1.as_deref(), Some("forge_loop_failed"));
    assert_eq!(model_requests(&provider).await.len(), 2, "no model call");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_10_a_forge_lacking_a_loop_tool_fails_the_run_before_any_call() {
    // The Forge has no `agent.context.bundle`.
    let forge =
        FakeForge::with_tools(&["agent.inbox.list", "agent.inbox.ack", "chat.appendMessage"]);
    forge.assign("run_42", "iss_42");
    let forge_server = forge.serve().await;
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(hermes_testkit::openai_answer("x", 1, 1)),
        )
        .mount(&provider)
        .await;
    let (env, fleet) = fleet_with(&forge_server, &provider, 3).await;
    let closed = run_closed(
        &env,
        &fleet,
        &contract_wake("AGENT_ASSIGNED", "iss_42"),
        "dlv_13",
    )
    .await;
    assert_eq!(closed.0, "failed");
    assert_eq!(closed.1.as_deref(), Some("forge_loop_failed"));
    let detail = closed.2.unwrap_or_default();
    assert!(
        detail.contains("offers no agent.context.bundle tool"),
        "{detail}"
    );
    assert!(
        forge.run_calls().is_empty(),
        "nothing was called: {:?}",
        forge.tools_called()
    );
    assert!(model_requests(&provider).await.is_empty(), "no model call");
    fleet.stop().await.unwrap();
}
