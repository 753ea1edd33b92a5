//! Fan-out (docs/a2a.md, "Delegating to other workspaces"): an orchestrator workspace's A2A
//! task delegates with `delegate_task_async` to two other workspaces (one named by id, one
//! by slug) and to one that does not exist; its round is held until both runs have ended,
//! then the model gets their answers (and the refusal) as the calls' results and answers.
//! The delegated runs are offered no delegation, are A2A tasks of their workspaces, and are
//! stopped with their parent.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{KEY, TestEnv, eventually, metric, openai_answer, openai_tool_call};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::run_events::{gate, in_gate, slow_fetch_env};
use crate::runs::{provider_calls, sse, sse_text, sse_tool_call};

const ORCHESTRATOR: &str = "You are the orchestrator: delegate.";
const WRITER: &str = "You are the release-notes writer.";
const SUPPORT: &str = "You are the support analyst.";
const SLOW: &str = "You are the slow researcher.";

/// A streamed answer asking for several tool calls at once: (id, tool, arguments).
fn sse_tool_calls(calls: &[(&str, &str, Value)]) -> ResponseTemplate {
    let calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (id, tool, arguments))| {
            json!({"index": i, "id": id, "type": "function",
                   "function": {"name": tool, "arguments": arguments.to_string()}})
        })
        .collect();
    sse(&[
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": calls},
                            "finish_reason": null}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}}),
    ])
}

/// A delegated run's answer: delegated runs are not streamed (nobody follows them).
fn reply(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(openai_answer(text, 20, 4))
}

/// Answer `template` to the model calls whose body holds every one of `holding`.
async fn answer(provider: &MockServer, holding: &[&str], priority: u8, template: ResponseTemplate) {
    let mut mock = Mock::given(method("POST")).and(path("/v1/chat/completions"));
    for h in holding {
        mock = mock.and(body_string_contains(*h));
    }
    mock.respond_with(template)
        .with_priority(priority)
        .mount(provider)
        .await;
}

/// Create a workspace over HTTP; its id.
async fn workspace(
    fleet: &hermes_testkit::Fleet,
    name: &str,
    role: &str,
    orchestrator: bool,
) -> String {
    let (status, w) = fleet
        .post_json(
            "/workspaces",
            KEY,
            &json!({"name": name, "role": role, "orchestrator": orchestrator}),
        )
        .await;
    assert_eq!(status, 201, "{w}");
    assert_eq!(w["orchestrator"], orchestrator, "{w}");
    w["id"].as_str().unwrap().to_string()
}

/// An A2A 0.3 `message/send` of `text` to workspace `id`; the JSON-RPC answer.
async fn send(fleet: &hermes_testkit::Fleet, id: &str, text: &str, blocking: bool) -> Value {
    let body = json!({
        "jsonrpc": "2.0", "id": "fan-1", "method": "message/send",
        "params": {
            "message": {"kind": "message", "role": "user", "messageId": uuid::Uuid::now_v7().to_string(),
                        "parts": [{"kind": "text", "text": text}]},
            "configuration": {"blocking": blocking},
        },
    });
    let (status, answer) = fleet
        .post_json(&format!("/workspaces/{id}/a2a"), KEY, &body)
        .await;
    assert_eq!(status, 200, "{answer}");
    answer
}

/// The names of the tools a model call was offered.
fn offered(call: &Value) -> Vec<String> {
    call["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a model call's messages mention `text`.
fn mentions(call: &Value, text: &str) -> bool {
    call["messages"].to_string().contains(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orchestrator_fans_out_to_two_workspaces_and_answers_with_both_results() {
    let provider = MockServer::start().await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test")
        .set("HERMES_CONSOLE", "true");
    let fleet = env.start(&Service::ALL).await;
    let orchestrator = workspace(&fleet, "Orchestrator", ORCHESTRATOR, true).await;
    let writers = workspace(&fleet, "Writers", WRITER, false).await;
    workspace(&fleet, "Support Desk", SUPPORT, false).await;

    answer(
        &provider,
        &[ORCHESTRATOR, "\"role\":\"tool\""],
        1,
        sse_text(&["Both ", "done."]),
    )
    .await;
    let fan_out = sse_tool_calls(&[
        (
            "call_1",
            "delegate_task_async",
            json!({"workspace": writers, "task": "Draft release notes for v2.1"}),
        ),
        (
            "call_2",
            "delegate_task_async",
            json!({"workspace": "support-desk", "task": "Summarise the last 30 days of support tickets"}),
        ),
        (
            "call_3",
            "delegate_task_async",
            json!({"workspace": "nowhere", "task": "anything"}),
        ),
    ]);
    answer(&provider, &[ORCHESTRATOR], 2, fan_out).await;
    answer(&provider, &[WRITER], 3, reply("Release notes drafted.")).await;
    answer(&provider, &[SUPPORT], 3, reply("Tickets summarised.")).await;

    let answered = send(&fleet, &orchestrator, "Fan out the release work", true).await;
    let task = &answered["result"];
    assert_eq!(task["status"]["state"], "completed", "{answered}");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"], "Both done.",
        "{answered}"
    );
    let parent = task["id"].as_str().unwrap().to_string();

    // The model got every call's result in its second call: both answers, and a refusal.
    let calls = provider_calls(&provider).await;
    let has_results = |c: &Value| {
        c["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
    };
    let last = calls
        .iter()
        .find(|c| mentions(c, ORCHESTRATOR) && has_results(c))
        .expect("the orchestrator's round came back");
    let results: Vec<Value> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| serde_json::from_str(m["content"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    let by_answer = |a: &str| results.iter().find(|r| r["answer"] == a).cloned();
    let notes = by_answer("Release notes drafted.")
        .unwrap_or_else(|| panic!("the writers' answer: {results:?}"));
    assert_eq!(
        (notes["status"].as_str(), notes["workspace"].as_str()),
        (Some("completed"), Some("writers"))
    );
    let tickets = by_answer("Tickets summarised.").expect("the support desk's answer");
    assert_eq!(tickets["workspace"], "support-desk");
    assert!(
        results.iter().any(|r| r["reason"] == "unknown_workspace"),
        "{results:?}"
    );

    // Only the orchestrator was offered the tool.
    let first = calls.iter().find(|c| mentions(c, ORCHESTRATOR)).unwrap();
    assert!(
        offered(first).contains(&"delegate_task_async".to_string()),
        "{first}"
    );
    for role in [WRITER, SUPPORT] {
        let call = calls.iter().find(|c| mentions(c, role)).unwrap();
        assert!(
            !offered(call).contains(&"delegate_task_async".to_string()),
            "{call}"
        );
    }

    // Each delegated run is a completed run of its own, linked, and an A2A task of its
    // workspace in the parent's context.
    let c = env.db().get().await.unwrap();
    let rows = c
        .query(
            "SELECT d.status, r.status, r.sender_id, t.context_id, w.slug
             FROM delegations d JOIN agent_runs r ON r.id = d.child_run_id
             JOIN a2a_tasks t ON t.run_id = d.child_run_id
             JOIN workspaces w ON w.id = t.workspace_id
             WHERE d.parent_run_id = $1::text::uuid ORDER BY w.slug",
            &[&parent],
        )
        .await
        .unwrap();
    let seen: Vec<(String, String, String, String, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect();
    let context = format!("delegation-{parent}");
    assert_eq!(
        seen,
        [
            (
                "completed".into(),
                "completed".into(),
                "delegation".into(),
                context.clone(),
                "support-desk".into()
            ),
            (
                "completed".into(),
                "completed".into(),
                "delegation".into(),
                context,
                "writers".into()
            ),
        ]
    );
    // The console links both ways: the parent lists its delegated runs, each names its parent.
    let cookie = crate::console::logged_in(&fleet).await;
    let page = crate::console::get(&fleet, &format!("/console/runs/{parent}"), &cookie).await;
    let page = page.text().await.unwrap();
    assert!(page.contains("<h2>Delegated runs</h2>"), "{page}");
    assert!(
        page.contains("in writers, completed") && page.contains("in support-desk, completed"),
        "{page}"
    );
    let child: String = c
        .query_one(
            "SELECT child_run_id::text FROM delegations WHERE parent_run_id = $1::text::uuid LIMIT 1",
            &[&parent],
        )
        .await
        .unwrap()
        .get(0);
    let page = crate::console::get(&fleet, &format!("/console/runs/{child}"), &cookie).await;
    let page = page.text().await.unwrap();
    assert!(
        page.contains(&format!("Delegated by <a href=\"/console/runs/{parent}\">")),
        "{page}"
    );
    let metrics = fleet.metrics().await;
    for (outcome, n) in [("started", 2.0), ("refused", 1.0), ("resumed", 1.0)] {
        let series = format!("hermes_delegations_total{{outcome=\"{outcome}\"}}");
        assert_eq!(metric(&metrics, &series), Some(n), "{series}");
    }
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_orchestrator_task_stops_the_run_it_delegated() {
    let (port, mut arrived, release) = gate().await;
    let provider = MockServer::start().await;
    let mut env = TestEnv::new().await;
    let config = slow_fetch_env(&mut env, &provider);
    let fleet = env.start(&Service::ALL).await;
    let orchestrator = workspace(&fleet, "Boss", ORCHESTRATOR, true).await;
    workspace(&fleet, "Slow", SLOW, false).await;
    let fetch = json!({"url": format!("http://127.0.0.1:{port}/slow")});
    answer(
        &provider,
        &[SLOW],
        2,
        ResponseTemplate::new(200).set_body_json(openai_tool_call("http_fetch", &fetch)),
    )
    .await;
    answer(&provider, &[SLOW, "\"role\":\"tool\""], 1, reply("never")).await;
    answer(
        &provider,
        &[ORCHESTRATOR],
        2,
        sse_tool_call(
            "delegate_task_async",
            &json!({"workspace": "slow", "task": "dig"}),
        ),
    )
    .await;
    answer(
        &provider,
        &[ORCHESTRATOR, "\"role\":\"tool\""],
        1,
        sse_text(&["never"]),
    )
    .await;

    let started = send(&fleet, &orchestrator, "Start the slow work", false).await;
    let parent = started["result"]["id"].as_str().unwrap().to_string();
    // The delegated run's tool call is in flight: cancel the orchestrator's task.
    in_gate(&mut arrived).await;
    let cancel =
        json!({"jsonrpc": "2.0", "id": "c", "method": "tasks/cancel", "params": {"id": parent}});
    let url = format!("/workspaces/{orchestrator}/a2a");
    let db = env.db();
    // The cancel waits a moment for the task to end; meanwhile the stop reaches the
    // delegated run, and only then is its tool call let go.
    let child_stopped = async {
        let child: String = eventually(
            Duration::from_secs(60),
            "the delegated run asked to stop",
            || async {
                let c = db.get().await.ok()?;
                let row = c
                    .query_opt(
                        "SELECT d.child_run_id::text FROM delegations d
                         JOIN agent_runs r ON r.id = d.child_run_id
                         WHERE d.parent_run_id = $1::text::uuid
                           AND r.stop_requested_at IS NOT NULL",
                        &[&parent],
                    )
                    .await
                    .ok()??;
                Some(row.get(0))
            },
        )
        .await;
        release.send(()).await.unwrap();
        child
    };
    let ((status, _), child) = tokio::join!(fleet.post_json(&url, KEY, &cancel), child_stopped);
    assert_eq!(status, 200);

    // Both end cancelled, and neither model was called again.
    eventually(Duration::from_secs(60), "both runs cancelled", || async {
        let c = db.get().await.ok()?;
        let rows = c
            .query(
                "SELECT status FROM agent_runs WHERE id IN ($1::text::uuid, $2::text::uuid)",
                &[&parent, &child],
            )
            .await
            .ok()?;
        (rows.len() == 2 && rows.iter().all(|r| r.get::<_, String>(0) == "cancelled")).then_some(())
    })
    .await;
    let calls = provider_calls(&provider).await;
    assert!(
        !calls
            .iter()
            .any(|c| c["messages"].to_string().contains("fetched")),
        "no call after the stop"
    );
    let c = db.get().await.unwrap();
    let ended: String = c
        .query_one(
            "SELECT status FROM delegations WHERE child_run_id = $1::text::uuid",
            &[&child],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(ended, "cancelled");
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(config);
}
