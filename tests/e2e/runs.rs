//! The Runs API through the whole fleet (docs/api.md, runs): a run is started and answers at
//! once, is polled to its end, belongs to the key that made it, refuses bad input with a
//! message naming the field, is shown queued before it is routed, and is held to the
//! engagement mode it was dispatched with.

use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys::{self, KeyScope};
use hermes_testkit::{KEY, TestEnv, eventually};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A streamed OpenAI answer made of `chunks` (each a chunk's JSON), then `[DONE]`.
pub(crate) fn sse(chunks: &[Value]) -> ResponseTemplate {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body)
}

/// A streamed answer asking for one call of `tool` (`call_1`), with 30/9 tokens.
pub(crate) fn sse_tool_call(tool: &str, arguments: &Value) -> ResponseTemplate {
    sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function",
             "function": {"name": tool, "arguments": arguments.to_string()}}
        ]}, "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}}),
    ])
}

/// A streamed text answer in `pieces`, with 40/3 tokens.
pub(crate) fn sse_text(pieces: &[&str]) -> ResponseTemplate {
    let mut chunks: Vec<Value> = pieces
        .iter()
        .map(|p| json!({"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": null}]}))
        .collect();
    chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    chunks.push(json!({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}}));
    sse(&chunks)
}

/// A provider that asks for `tool` with `arguments` first and answers `pieces` once it
/// sees a tool result.
pub(crate) async fn provider_asking_for(
    tool: &str,
    arguments: Value,
    pieces: &[&str],
) -> MockServer {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(sse_text(pieces))
        .with_priority(1)
        .mount(&provider)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse_tool_call(tool, &arguments))
        .with_priority(2)
        .mount(&provider)
        .await;
    provider
}

/// The provider's requests so far, oldest first, as JSON.
pub(crate) async fn provider_calls(provider: &MockServer) -> Vec<Value> {
    provider
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

/// Start a run with `body`; its id.
pub(crate) async fn start_run(fleet: &hermes_testkit::Fleet, key: &str, body: Value) -> String {
    let (status, started) = fleet.post_json("/v1/runs", key, &body).await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["status"], "started", "{started}");
    started["run_id"].as_str().unwrap().to_string()
}

/// The run once its status is `status`.
pub(crate) async fn run_in(fleet: &hermes_testkit::Fleet, run: &str, status: &str) -> Value {
    let path = format!("/v1/runs/{run}");
    eventually(Duration::from_secs(30), status, || async {
        let (code, v) = fleet.get_json(&path, KEY).await;
        (code == 200 && v["status"] == status).then_some(v)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_starts_at_once_and_is_polled_to_its_answer() {
    let env = TestEnv::new().await;
    let fleet = env.start(&Service::ALL).await;
    let run = start_run(
        &fleet,
        KEY,
        json!({"input": "hello runs", "session_id": "space-session", "instructions": "be brief"}),
    )
    .await;
    let done = run_in(&fleet, &run, "completed").await;
    assert_eq!(done["object"], "hermes.run");
    // What a caller sent is kept as JSON in PostgreSQL and read back exactly: the largest
    // double, stored there as a 309-digit number, once made reading the run a 500 (found by
    // schemathesis).
    let extreme = start_run(
        &fleet,
        KEY,
        json!({"input": "extreme", "runtime_policy": {"limit": f64::MAX, "least": f64::MIN_POSITIVE}}),
    )
    .await;
    run_in(&fleet, &extreme, "completed").await;
    assert_eq!(done["run_id"], run);
    assert_eq!(done["output"], "echo: hello runs");
    assert_eq!(done["session_id"], "space-session");
    assert!(done["error"].is_null());
    assert_eq!(
        done["usage"]["total_tokens"],
        done["usage"]["input_tokens"].as_u64().unwrap()
            + done["usage"]["output_tokens"].as_u64().unwrap()
    );
    assert!(
        done["usage"]["output_tokens"].as_u64().unwrap() > 0,
        "{done}"
    );
    assert!(done["model"].is_string(), "{done}");

    // The dispatch fields were recorded with the run.
    let client = env.db().get().await.unwrap();
    let row = client
        .query_one(
            "SELECT metadata, status FROM agent_runs WHERE id = $1::text::uuid",
            &[&run],
        )
        .await
        .unwrap();
    let metadata: Value = row.get(0);
    assert_eq!(metadata["session_id"], "space-session");
    assert_eq!(row.get::<_, String>(1), "completed");
    drop(client);

    // No listing: the probe of an orchestrator reads 405 as "the route exists".
    let resp = reqwest::Client::new()
        .get(fleet.url("/v1/runs"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "POST");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "method_not_allowed");

    // A finished run cannot be stopped; an unknown one is not found.
    let (status, answer) = fleet
        .post_json(&format!("/v1/runs/{run}/stop"), KEY, &json!({}))
        .await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["code"], "run_finished");
    let unknown = uuid::Uuid::now_v7();
    let (status, _) = fleet.get_json(&format!("/v1/runs/{unknown}"), KEY).await;
    assert_eq!(status, 404);
    let (status, _) = fleet
        .post_json(&format!("/v1/runs/{unknown}/stop"), KEY, &json!({}))
        .await;
    assert_eq!(status, 404);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_runs_are_refused_with_the_field_named_and_runs_belong_to_their_key() {
    let env = TestEnv::new().await;
    let client = env.db().get().await.unwrap();
    let mut keys = Vec::new();
    for name in ["a", "b"] {
        let created = api_keys::create(&client, name, None, None).await.unwrap();
        api_keys::set_scopes(&client, created.key.id, &[KeyScope::Chat])
            .await
            .unwrap();
        keys.push(created.secret_key);
    }
    let rest_only = api_keys::create(&client, "rest", None, None).await.unwrap();
    drop(client);
    let fleet = env.start(&Service::ALL).await;
    for (body, says) in [
        (json!({}), "input is required"),
        (json!({"input": ""}), "input must not be empty"),
        (
            json!({"input": "x", "engagement_mode": "AUDIT"}),
            "engagement_mode: \"AUDIT\" is not one of EXECUTE, REVIEW, RESEARCH, DISCUSS",
        ),
        (
            json!({"input": "x", "tool_allowlist": "terminal"}),
            "tool_allowlist must be an array of strings",
        ),
        (
            json!({"input": "x", "engagement_mode": "REVIEW", "runtime_policy": {"engagement_mode": "EXECUTE"}}),
            "engagement_mode and runtime_policy disagree",
        ),
        (
            json!({"input": "x", "conversation_history": [{"role": "robot", "content": "x"}]}),
            "conversation_history[0].role",
        ),
    ] {
        let (status, answer) = fleet.post_json("/v1/runs", KEY, &body).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_request", "{answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    let (status, _) = fleet
        .post_json("/v1/runs", &rest_only.secret_key, &json!({"input": "x"}))
        .await;
    assert_eq!(status, 403, "a key without the chat scope starts no run");

    // Key a's run: a and the operator see it, b is told there is no such run.
    let run = start_run(&fleet, &keys[0], json!({"input": "mine"})).await;
    let run_path = format!("/v1/runs/{run}");
    let seen = eventually(Duration::from_secs(30), "a's run done", || async {
        let (_, v) = fleet.get_json(&run_path, &keys[0]).await;
        (v["status"] == "completed").then_some(v)
    })
    .await;
    assert_eq!(seen["output"], "echo: mine");
    assert_eq!(fleet.get_json(&run_path, KEY).await.0, 200);
    assert_eq!(fleet.get_json(&run_path, &keys[1]).await.0, 404);
    assert_eq!(
        fleet
            .get_json(&format!("{run_path}/events"), &keys[1])
            .await
            .0,
        404
    );
    assert_eq!(
        fleet
            .post_json(&format!("/v1/runs/{run}/stop"), &keys[1], &json!({}))
            .await
            .0,
        404
    );
    fleet.stop().await.unwrap();
}

/// A configuration file declaring a local-host toolset `mcp-shell` (its server is never
/// reached: the test publishes its tool to the registry itself).
fn shell_config(ns: &str) -> std::path::PathBuf {
    let file = std::env::temp_dir().join(format!("{ns}-shell.toml"));
    std::fs::write(
        &file,
        "[mcp_servers.shell]\ncommand = \"/usr/local/bin/shell-mcp\"\nlocal_host = true\n",
    )
    .unwrap();
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_run_is_not_offered_and_cannot_run_a_local_host_tool() {
    let provider =
        provider_asking_for("mcp_shell_run", json!({"command": "rm -rf /"}), &["done"]).await;
    let mut env = TestEnv::new().await;
    let config = shell_config(&env.ns);
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test")
        .set("HERMES_CONFIG", config.to_str().unwrap());
    // Published before the fleet starts, as a shell server's tools would be: the router's
    // first run reads the registry whole.
    {
        let mut c = env.db().get().await.unwrap();
        let shell = hermes_types::model::ToolSpec {
            name: "mcp_shell_run".into(),
            description: "run a shell command".into(),
            parameters: json!({"type": "object"}),
            toolset: "mcp-shell".into(),
        };
        hermes_db::tool_registry::publish(&mut c, &["mcp-shell"], &[shell])
            .await
            .unwrap();
    }
    let fleet = env.start(&Service::ALL).await;
    // An EXECUTE run (no policy) is offered the host tool: what follows is the mode's doing.
    let execute = start_run(&fleet, KEY, json!({"input": "list the files please"})).await;
    run_in(&fleet, &execute, "completed").await;
    let offered = |call: &Value| -> Vec<String> {
        call["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let calls = provider_calls(&provider).await;
    assert!(
        offered(&calls[0]).contains(&"mcp_shell_run".to_string()),
        "{}",
        calls[0]
    );

    let review = start_run(
        &fleet,
        KEY,
        json!({
            "input": "review the repository",
            "engagement_mode": "REVIEW",
            "forge_contract_version": "2026-06-06.2",
            "tool_allowlist": [],
            "runtime_policy": {
                "contract_version": "2026-06-06.2",
                "engagement_mode": "REVIEW",
                "allowed_host_tools": [],
                "enforcement_layers": [{"kind": "forge-mcp", "enforced": true}, {"kind": "hermes-host", "enforced": true}]
            }
        }),
    )
    .await;
    let done = run_in(&fleet, &review, "completed").await;
    assert_eq!(done["output"], "done");
    let calls = provider_calls(&provider).await;
    assert_eq!(calls.len(), 4, "two runs, two calls each");
    let first = &calls[2];
    let names = offered(first);
    assert!(!names.contains(&"mcp_shell_run".to_string()), "{first}");
    assert!(
        names.contains(&"current_time".to_string()),
        "other tools stay: {first}"
    );
    // The model asked anyway: the tools stage refused, and the refusal is what it saw.
    let tool_turn = calls[3]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    let refusal: Value = serde_json::from_str(tool_turn["content"].as_str().unwrap()).unwrap();
    assert_eq!(refusal["refused"], true, "{refusal}");
    assert_eq!(refusal["tool"], "mcp_shell_run");
    assert_eq!(refusal["engagement_mode"], "REVIEW");
    let client = env.db().get().await.unwrap();
    let row = client
        .query_one(
            "SELECT metadata FROM agent_runs WHERE id = $1::text::uuid",
            &[&review],
        )
        .await
        .unwrap();
    let metadata: Value = row.get(0);
    assert_eq!(
        metadata["policy"],
        json!({"engagement_mode": "REVIEW", "tool_allowlist": []})
    );
    assert_eq!(metadata["forge_contract_version"], "2026-06-06.2");
    drop(client);
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(config);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_not_yet_routed_is_shown_queued_to_its_key_and_cannot_be_stopped_yet() {
    let env = TestEnv::new().await;
    // Only ingest: the run is accepted and waits in the router's queue.
    let ingest = env.start(&[Service::Ingest]).await;
    let run = start_run(
        &ingest,
        KEY,
        json!({"input": "wait for me", "session_id": "s-9"}),
    )
    .await;
    let url = ingest.url(&format!("/v1/runs/{run}"));
    let (status, queued) = ingest.get_json(&format!("/v1/runs/{run}"), KEY).await;
    assert_eq!(status, 200, "{queued}");
    assert_eq!(queued["status"], "queued");
    assert_eq!(queued["session_id"], "s-9");
    let resp = reqwest::Client::new()
        .post(format!("{url}/stop"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 409);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "run_queued");
    // The rest of the fleet comes up and the run goes through.
    let stages = env
        .start(&[
            Service::Router,
            Service::Llm,
            Service::Tools,
            Service::Delivery,
        ])
        .await;
    let done = run_in(&ingest, &run, "completed").await;
    assert_eq!(done["output"], "echo: wait for me");
    assert_eq!(done["session_id"], "s-9");
    stages.stop().await.unwrap();
    ingest.stop().await.unwrap();
}

/// A key with the `chat` scope only.
async fn chat_key(env: &TestEnv, name: &str) -> api_keys::Created {
    let c = env.db().get().await.unwrap();
    let key = api_keys::create(&c, name, None, None).await.unwrap();
    api_keys::set_scopes(&c, key.key.id, &[KeyScope::Chat])
        .await
        .unwrap();
    key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_keys_runs_get_no_local_host_tool_unless_the_key_was_granted_it() {
    let provider = provider_asking_for(
        "mcp_shell_run",
        json!({"command": "cat /etc/passwd"}),
        &["done"],
    )
    .await;
    let mut env = TestEnv::new().await;
    let config = shell_config(&env.ns);
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test")
        .set("HERMES_CONFIG", config.to_str().unwrap());
    {
        let mut c = env.db().get().await.unwrap();
        let shell = hermes_types::model::ToolSpec {
            name: "mcp_shell_run".into(),
            description: "run a shell command".into(),
            parameters: json!({"type": "object"}),
            toolset: "mcp-shell".into(),
        };
        hermes_db::tool_registry::publish(&mut c, &["mcp-shell"], &[shell])
            .await
            .unwrap();
    }
    let plain = chat_key(&env, "plain").await;
    let granted = chat_key(&env, "granted").await;
    let (code, out, err) = env
        .hermes(&[
            "api-keys",
            "set",
            &granted.key.id.to_string(),
            "--toolsets",
            "mcp-shell",
        ])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("host toolsets mcp-shell"), "{out}");
    let fleet = env.start(&Service::ALL).await;
    let offered = |call: &Value| -> Vec<String> {
        call["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };

    // A key granted nothing: its EXECUTE run is not offered the host tool, and the model's
    // call of it anyway is refused by the tools stage.
    let run = start_run(
        &fleet,
        &plain.secret_key,
        json!({"input": "list the files please"}),
    )
    .await;
    run_in(&fleet, &run, "completed").await;
    let calls = provider_calls(&provider).await;
    assert_eq!(calls.len(), 2, "the call, then the tool round");
    let names = offered(&calls[0]);
    assert!(
        !names.contains(&"mcp_shell_run".to_string()),
        "{}",
        calls[0]
    );
    assert!(
        names.contains(&"current_time".to_string()),
        "other tools stay"
    );
    let tool_turn = calls[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    let refusal: Value = serde_json::from_str(tool_turn["content"].as_str().unwrap()).unwrap();
    assert_eq!(refusal["refused"], true, "{refusal}");
    assert_eq!(refusal["tool"], "mcp_shell_run");

    // The key granted `mcp-shell` is offered it.
    let run = start_run(
        &fleet,
        &granted.secret_key,
        json!({"input": "list the files please"}),
    )
    .await;
    run_in(&fleet, &run, "completed").await;
    let calls = provider_calls(&provider).await;
    assert!(
        offered(&calls[2]).contains(&"mcp_shell_run".to_string()),
        "{}",
        calls[2]
    );
    assert_eq!(
        hermes_testkit::metric(
            &fleet.metrics().await,
            "hermes_tool_refusals_total{reason=\"not_offered\"}"
        ),
        Some(1.0)
    );
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(config);
}
