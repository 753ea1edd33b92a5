//! A2A per workspace (docs/a2a.md) with the official A2A Python SDK as the client
//! (`tests/a2a/client.py`, a2a-sdk 1.x, pinned in tests/a2a/requirements.txt): the agent
//! card declares both JSON-RPC interfaces; in 0.3 and in 1.0 a message is answered through
//! the fleet's fake model, read back, continued in its context (the model is given the
//! earlier turn, and both runs share one session), streamed, failed with its reason (status updates and the final artifact); unknown and ended tasks
//! get the SDK's errors, and another key's task is not found; bad requests get the
//! specification's codes; no key and a key without the `a2a` scope are refused; and a running task is canceled (its tool call held
//! until the stop is recorded).

use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys::KeyScope;
use hermes_testkit::{KEY, TestEnv, eventually};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::operator_mcp::key_with;
use crate::run_events::{gate, in_gate, slow_fetch_env};
use crate::runs::{provider_calls, sse_text, sse_tool_call};
use tokio::io::AsyncWriteExt;

/// What the fake model answers every message but the slow ones.
const ANSWER: &str = "Hello from Hermes.";
const ROLE: &str = "You are the Axiom research agent.";

/// A model that answers [`ANSWER`] in pieces, a message naming a "slow task" with a call of
/// `http_fetch` to `slow_url` (then, given the tool's result, anything), and refuses one
/// naming a "failing task".
async fn model(slow_url: &str) -> MockServer {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(sse_text(&["fetched."]))
        .with_priority(1)
        .mount(&provider)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("slow task"))
        .respond_with(sse_tool_call("http_fetch", &json!({"url": slow_url})))
        .with_priority(2)
        .mount(&provider)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("failing task"))
        .respond_with(ResponseTemplate::new(400).set_body_json(
            json!({"error": {"message": "refused", "type": "invalid_request_error"}}),
        ))
        .with_priority(2)
        .mount(&provider)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(sse_text(&["Hello ", "from ", "Hermes."]))
        .with_priority(3)
        .mount(&provider)
        .await;
    provider
}

/// The texts of a model request's messages, in order.
fn texts(call: &Value) -> Vec<String> {
    call["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|m| m["content"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_talks_to_a_workspace_in_a2a_0_3_and_1_0() {
    let Some(python) = std::env::var_os("HERMES_A2A_PYTHON") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the A2A SDK is missing: scripts/test installs it (tests/a2a/requirements.txt)"
        );
        eprintln!("the A2A SDK is not installed: skipped (scripts/test installs it)");
        return;
    };
    let (port, mut arrived, release) = gate().await;
    let provider = model(&format!("http://127.0.0.1:{port}/slow")).await;
    let mut env = TestEnv::new().await;
    let config = slow_fetch_env(&mut env, &provider);
    let (_, a2a_key) = key_with(&env, &[KeyScope::A2a]).await;
    let (_, chat_key) = key_with(&env, &[KeyScope::Chat]).await;
    let (_, other_key) = key_with(&env, &[KeyScope::A2a]).await;
    let fleet = env.start(&Service::ALL).await;
    let (status, workspace) = fleet
        .post_json(
            "/workspaces",
            KEY,
            &json!({"name": "Axiom A2A", "role": ROLE}),
        )
        .await;
    assert_eq!(status, 201, "{workspace}");
    let url = fleet.url(&format!(
        "/workspaces/{}/a2a",
        workspace["id"].as_str().unwrap()
    ));

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/a2a/client.py");
    let mut client = tokio::process::Command::new(python)
        .arg(script)
        .env("A2A_URL", &url)
        .env("A2A_KEY", &a2a_key)
        .env("CHAT_KEY", &chat_key)
        .env("OTHER_KEY", &other_key)
        .env("ANSWER", ANSWER)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python runs");
    let mut running = client.stdin.take().expect("the script's stdin");
    // The two canceled tasks (1.0, then 0.3): each one's tool call is held until its stop is
    // recorded, so the task is running when it is canceled; the script is told when it is.
    let db = env.db();
    for canceled in 1..=2i64 {
        in_gate(&mut arrived).await;
        running.write_all(b"running\n").await.unwrap();
        running.flush().await.unwrap();
        eventually(Duration::from_secs(60), "the stop recorded", || async {
            let c = db.get().await.ok()?;
            let row = c
                .query_one(
                    "SELECT count(*) FROM agent_runs WHERE stop_requested_at IS NOT NULL",
                    &[],
                )
                .await
                .ok()?;
            (row.get::<_, i64>(0) >= canceled).then_some(())
        })
        .await;
        release.send(()).await.unwrap();
    }
    let out = tokio::time::timeout(Duration::from_secs(120), client.wait_with_output())
        .await
        .expect("the SDK's script ends")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the SDK's script failed:\n{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("the script's report");

    // A context's second message was answered with its first turn and the workspace's role.
    let calls = provider_calls(&provider).await;
    for version in ["1.0", "0.3"] {
        let context = report["contexts"][version].as_str().unwrap();
        assert!(!context.is_empty());
        let second = calls
            .iter()
            .map(texts)
            .find(|t| t.last() == Some(&format!("what is my name? ({version})")))
            .unwrap_or_else(|| panic!("{version}: the second message reached the model"));
        assert_eq!(
            second,
            [
                ROLE.to_string(),
                format!("my name is Ada ({version})"),
                ANSWER.to_string(),
                format!("what is my name? ({version})"),
            ],
            "{version}: the context's history"
        );
    }
    // A message of another context saw none of it.
    let streamed = calls
        .iter()
        .map(texts)
        .find(|t| t.last().is_some_and(|l| l.starts_with("stream please")))
        .expect("the streamed message reached the model");
    assert_eq!(streamed.len(), 2, "{streamed:?}");

    // A context is one session: its two runs went into the same one.
    let c = db.get().await.unwrap();
    for version in ["1.0", "0.3"] {
        let context = report["contexts"][version].as_str().unwrap();
        let row = c
            .query_one(
                "SELECT count(*), count(r.session_id), count(DISTINCT r.session_id)
                 FROM a2a_tasks t JOIN agent_runs r ON r.id = t.run_id WHERE t.context_id = $1",
                &[&context],
            )
            .await
            .unwrap();
        let counts: (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
        assert_eq!(counts, (2, 2, 1), "{version}: runs, sessions, distinct");
    }
    // Each canceled task's run closed cancelled.
    let cancelled: i64 = c
        .query_one(
            "SELECT count(*) FROM agent_runs r JOIN a2a_tasks t ON t.run_id = r.id
             WHERE r.status = 'cancelled'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(cancelled, 2);
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(config);
}
