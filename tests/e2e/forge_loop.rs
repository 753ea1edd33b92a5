//! Hermes as a Forge agent, end to end (docs/agents.md, "Hermes as a Forge agent"): a
//! signed wake for the internal agent `victor` runs the agent contract's loop against a
//! fake Forge's MCP surface (`[mcp_servers.forge]`, streamable HTTP with a Bearer key):
//! Hermes lists the inbox, acknowledges and reads the bundle, then the model acts across
//! four tool rounds, and the fake Forge sees exactly that, in that order. A REVIEW wake is
//! never offered a local-host toolset; a run at its agent's `max_tool_rounds` ends with an
//! answer instead of looping; a chat message still takes one round.

use std::time::Duration;

use hermes::Service;
use hermes_db::agents::{self, AgentUpdate};
use hermes_testkit::{TestEnv, count, eventually};
use hermes_types::agent::AgentKind;
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::fake_forge::FakeForge;
use crate::forge_wakes::{agent, forge_env, wake};

/// The Bearer key Hermes presents to the fake Forge.
const FORGE_KEY: &str = "forge_sk_test_victor";

/// What the model of a Forge run does once Hermes listed, acknowledged and read the run,
/// one tool per round.
const LOOP: [&str; 4] = [
    "mcp_forge_chat_appendMessage",
    "mcp_forge_agents_me",
    "mcp_forge_agents_heartbeat",
    "mcp_forge_chat_appendMessage",
];

/// A chat completion asking for `tool` with `arguments` (call ids unique per round).
pub(crate) fn tool_call(tool: &str, arguments: Value, round: usize) -> Value {
    json!({
        "id": format!("c{round}"), "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{round}"), "type": "function",
             "function": {"name": tool, "arguments": arguments.to_string()}}
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}
    })
}

/// The last user turn of a model request.
pub(crate) fn user_turn(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// The run tag a test put in a wake's envelope (`run.id`), read back from the user turn.
pub(crate) fn tag_of(body: &Value) -> Option<String> {
    let turn = user_turn(body);
    // The envelope is the line after the header; the bundle Hermes read follows it.
    let envelope = turn
        .strip_prefix("Forge wake ")?
        .split_once('\n')?
        .1
        .lines()
        .next()?;
    let v: Value = serde_json::from_str(envelope).ok()?;
    v["run"]["id"].as_str().map(str::to_string)
}

/// The fake model: a Forge run walks [`LOOP`] one round at a time, then answers; anything
/// else asks for a tool every time (so only the round bound ends it).
fn model(req: &Request) -> ResponseTemplate {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let rounds = body["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    let answer = match tag_of(&body) {
        Some(tag) if rounds < LOOP.len() => {
            let arguments = match rounds {
                0 | 3 => json!({"threadId": tag, "body": "On it."}),
                2 => json!({"status": "ONLINE"}),
                _ => json!({}),
            };
            tool_call(LOOP[rounds], arguments, rounds)
        }
        Some(_) => hermes_testkit::openai_answer("done", 10, 2),
        None => tool_call("current_time", json!({}), rounds),
    };
    ResponseTemplate::new(200).set_body_json(answer)
}

/// The model requests of the run tagged `tag`.
async fn requests_of(provider: &MockServer, tag: &str) -> Vec<Value> {
    provider
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter(|b| tag_of(b).as_deref() == Some(tag))
        .collect()
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect()
}

/// A wake of the run tagged `tag` in `mode` for `victor` of the Forge workspace `forge`.
fn envelope(tag: &str, mode: &str) -> Value {
    json!({
        "kind": "AGENT_ASSIGNED",
        "workspace": {"id": "wks_forge", "slug": "forge"},
        "agent": {"id": "agt_victor", "profileKey": "victor"},
        "run": {"id": tag},
        "issue": {"id": "iss_1", "key": "AXI-42", "title": "Review the login page"},
        "engagement_mode": mode,
        "forge_contract_version": "2026-06-06.2",
    })
}

/// Wake the run tagged `tag` (put in `forge`'s inbox first) and wait until it is closed;
/// its id.
async fn run_to_the_end(
    env: &TestEnv,
    fleet: &hermes_testkit::Fleet,
    forge: &FakeForge,
    tag: &str,
    mode: &str,
) -> uuid::Uuid {
    forge.assign(tag, "iss_1");
    let resp = wake(fleet, &envelope(tag, mode), &format!("dlv_{tag}")).await;
    assert_eq!(resp.status(), 202, "{:?}", resp.text().await);
    let taken: Value = resp.json().await.unwrap();
    let run: uuid::Uuid = taken["run_id"].as_str().unwrap().parse().unwrap();
    let db = env.db();
    eventually(Duration::from_secs(60), "the Forge run closed", || async {
        let c = db.get().await.ok()?;
        let row = c
            .query_opt("SELECT status FROM agent_runs WHERE id = $1", &[&run])
            .await
            .ok()??;
        let status: String = row.get(0);
        (status != "routed" && status != "running" && status != "awaiting_tools").then_some(status)
    })
    .await;
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forge_wake_runs_list_ack_bundle_act_and_modes_and_rounds_bound_it() {
    let forge = FakeForge::new();
    let forge_server = forge.serve().await;
    // A local-host toolset (a shell on the tools service's host).
    let shell = FakeForge::with_tools(&["run"]);
    let shell_server = shell.serve().await;
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(model)
        .mount(&provider)
        .await;

    let mut env = TestEnv::new().await;
    let config = std::env::temp_dir().join(format!("{}-forge.toml", env.ns));
    std::fs::write(
        &config,
        format!(
            "[mcp_servers.forge]\nurl = \"{}/api/mcp/rpc\"\nheaders = {{ Authorization = \"Bearer {FORGE_KEY}\" }}\ntimeout = 10\n\n\
             [mcp_servers.shell]\nurl = \"{}/api/mcp/rpc\"\nlocal_host = true\ntimeout = 10\n",
            forge_server.uri(),
            shell_server.uri()
        ),
    )
    .unwrap();
    forge_env(&mut env)
        .openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test")
        .set("HERMES_CONFIG", config.to_str().unwrap())
        // Hermes's own presence calls once at start, then not within the test.
        .set("HERMES_FORGE_HEARTBEAT_SECS", "3600");
    // Victor lives in the workspace the Forge names; `default` has no agent, so a chat
    // message there is answered by the built-in persona.
    let db = env.db();
    db.get()
        .await
        .unwrap()
        .execute(
            "INSERT INTO workspaces (slug, name) VALUES ('forge', 'Forge')",
            &[],
        )
        .await
        .unwrap();
    let victor = agent(&env, "forge", "victor", AgentKind::Internal).await;
    let fleet = env.start(&Service::ALL).await;
    eventually(Duration::from_secs(30), "both MCP servers' tools published", || async {
        let n = count(
            &db,
            "SELECT count(*) FROM tool_registry WHERE name IN ('mcp_forge_agent_inbox_list', 'mcp_shell_run')",
            &[],
        )
        .await;
        (n == 2).then_some(())
    })
    .await;

    // EXECUTE: the whole loop, in order, with the Forge's key: Hermes's three calls, then
    // the model's four.
    eventually(
        Duration::from_secs(30),
        "Hermes's presence at start",
        || async {
            // `agents.me`, then the first heartbeat.
            (forge.presence().len() >= 2).then_some(())
        },
    )
    .await;
    let mark = forge.calls().len();
    let run = run_to_the_end(&env, &fleet, &forge, "t-exec", "EXECUTE").await;
    let calls = forge.calls()[mark..].to_vec();
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(
        tools,
        [
            "agent.inbox.list",
            "agent.inbox.ack",
            "agent.context.bundle",
            "chat.appendMessage",
            "agents.me",
            "agents.heartbeat",
            "chat.appendMessage"
        ]
    );
    assert_eq!(calls[0].arguments, json!({"status": "unacked"}));
    assert_eq!(calls[1].arguments, json!({"runId": "t-exec"}));
    assert!(
        calls
            .iter()
            .all(|c| c.authorization.as_deref() == Some(&format!("Bearer {FORGE_KEY}")))
    );
    let asked = requests_of(&provider, "t-exec").await;
    assert_eq!(asked.len(), 5, "four tool rounds, then the answer");
    let system = asked[0]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("acknowledged it") && system.contains("mcp_forge_chat_appendMessage"),
        "{system}"
    );
    let first = offered(&asked[0]);
    assert!(
        first.contains(&"mcp_forge_chat_appendMessage".to_string()),
        "{first:?}"
    );
    assert!(
        first.contains(&"mcp_shell_run".to_string()),
        "EXECUTE may use host tools: {first:?}"
    );
    let c = db.get().await.unwrap();
    let row = c
        .query_one(
            "SELECT status, platform, agent_id, dispatch->>'chosen', engagement_mode, contract_version,
                    user_id IS NULL, credits_charged
             FROM agent_runs WHERE id = $1",
            &[&run],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "completed");
    assert_eq!(row.get::<_, String>(1), Platform::Forge.as_str());
    assert_eq!(row.get::<_, uuid::Uuid>(2), victor.as_uuid());
    assert_eq!(row.get::<_, String>(3), "victor");
    assert_eq!(row.get::<_, String>(4), "EXECUTE");
    assert_eq!(row.get::<_, String>(5), "2026-06-06.2");
    assert!(row.get::<_, bool>(6), "no user");
    assert_eq!(row.get::<_, i64>(7), 0, "no credit");

    // REVIEW: no round of the run is offered the local-host toolset; the Forge's stays.
    let run = run_to_the_end(&env, &fleet, &forge, "t-review", "REVIEW").await;
    let asked = requests_of(&provider, "t-review").await;
    assert_eq!(asked.len(), 5);
    for body in &asked {
        let tools = offered(body);
        assert!(
            !tools.iter().any(|t| t.starts_with("mcp_shell_")),
            "{tools:?}"
        );
        assert!(
            tools.contains(&"mcp_forge_agent_inbox_ack".to_string()),
            "{tools:?}"
        );
    }
    assert!(
        asked[0]["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("REVIEW")
    );
    let mode: String = c
        .query_one(
            "SELECT engagement_mode FROM agent_runs WHERE id = $1",
            &[&run],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(mode, "REVIEW");
    assert!(shell.calls().is_empty(), "{:?}", shell.tools_called());

    // At its agent's bound the run ends with an answer: two rounds, then no more calls.
    let bound = AgentUpdate {
        max_tool_rounds: Some(2),
        ..AgentUpdate::default()
    };
    assert!(agents::update(&c, victor, &bound).await.unwrap());
    let before = forge.calls().len();
    let run = run_to_the_end(&env, &fleet, &forge, "t-bound", "EXECUTE").await;
    let asked = requests_of(&provider, "t-bound").await;
    assert_eq!(asked.len(), 3, "two rounds and the call after them");
    let after: Vec<String> = forge.calls()[before..]
        .iter()
        .map(|c| c.tool.clone())
        .collect();
    assert_eq!(
        after,
        [
            "agent.inbox.list",
            "agent.inbox.ack",
            "agent.context.bundle",
            "chat.appendMessage",
            "agents.me"
        ]
    );
    let status: String = c
        .query_one("SELECT status FROM agent_runs WHERE id = $1", &[&run])
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "completed");

    // A chat message of the built-in persona keeps one round, although its model asks on.
    env.user(Platform::Rest, "ann", 5).await;
    let bus = env.bus().await;
    let chat = hermes_testkit::fakes::send(&bus, "ann", "what time is it now?").await;
    eventually(Duration::from_secs(60), "the chat run closed", || async {
        let c = db.get().await.ok()?;
        let row = c
            .query_opt(
                "SELECT status FROM agent_runs WHERE id = $1 AND status = 'completed'",
                &[&chat.as_uuid()],
            )
            .await
            .ok()??;
        Some(row.get::<_, String>(0))
    })
    .await;
    let chat_calls = provider
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter(|b| user_turn(b) == "what time is it now?")
        .count();
    assert_eq!(chat_calls, 2, "one tool round, then the answer");
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(config);
}
