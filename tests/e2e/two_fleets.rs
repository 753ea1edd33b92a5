//! One contract, both directions (docs/agents.md, "The agent's side" and "Hermes as a Forge
//! agent"): fleet A dispatches a user's message to its external agent `victor`, whose webhook
//! is fleet B's `/agents/forge`; B's internal agent `victor` (a fake model that asks for the
//! tools) lists, acknowledges, reads the bundle and answers on A's MCP surface, configured on
//! B as `[mcp_servers.forge]`. A's Telegram user gets the answer, the run completes and the
//! agent's slot is free again; and an API caller of A sees a draft's deltas stream.

use std::time::Duration;

use hermes::Service;
use hermes_db::agents::{self, AgentUpdate};
use hermes_testkit::{Fleet, TestEnv, count, eventually, telegram_texts_to};
use hermes_types::agent::{AgentKind, EngagementMode};
use hermes_types::ids::AgentId;
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::agent_mcp::{
    AGENT_SECRET, SECRET_KEYS, TG_SECRET, assign, env_with, key, peer, run_status,
};
use crate::forge_loop::{tag_of, tool_call};
use crate::forge_wakes::agent;
use hermes_testkit::{openai_reply, telegram_text};

/// What fleet B's agent streams as a draft.
const CHUNKS: [&str; 2] = ["Once upon", " a time."];

/// The tool results fleet B's model has seen so far (the `tool` turns), in order.
fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_string))
        .collect()
}

/// The draft id in the result of `chat.startDraft` (a JSON text holding `"draftId"`).
fn draft_id(results: &[String]) -> Option<String> {
    results.iter().find_map(|r| {
        let at = r.find("\"draftId\"")?;
        let rest = &r[at + "\"draftId\"".len()..];
        let start = rest.find('"')? + 1;
        let end = start + rest[start..].find('"')?;
        Some(rest[start..end].to_string())
    })
}

/// Fleet B's model: the loop of the contract, one tool per round, on the run of fleet A named
/// in the wake. A message asking for a story is answered as a streamed draft.
fn model(req: &Request) -> ResponseTemplate {
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let Some(run) = tag_of(&body) else {
        return openai_reply(&body, hermes_testkit::openai_answer("no wake here", 5, 3));
    };
    let wake = body.to_string();
    let results = tool_results(&body);
    let round = results.len();
    let mut steps: Vec<(&str, Value)> = vec![
        ("mcp_forge_agent_inbox_list", json!({"status": "unacked"})),
        ("mcp_forge_agent_inbox_ack", json!({"runId": run})),
        ("mcp_forge_agent_context_bundle", json!({"issueId": run})),
    ];
    if wake.contains("story") {
        let draft = draft_id(&results).unwrap_or_default();
        steps.push(("mcp_forge_chat_startDraft", json!({"runId": run})));
        for delta in CHUNKS {
            steps.push((
                "mcp_forge_chat_appendDraftChunk",
                json!({"runId": run, "draftId": draft, "delta": delta}),
            ));
        }
        steps.push((
            "mcp_forge_chat_finalizeDraft",
            json!({"runId": run, "draftId": draft}),
        ));
    } else {
        steps.push((
            "mcp_forge_chat_appendMessage",
            json!({"runId": run, "body": "Table for two at 8pm is booked."}),
        ));
    }
    let answer = match steps.get(round) {
        Some((tool, arguments)) => tool_call(tool, arguments.clone(), round),
        None => hermes_testkit::openai_answer("done", 10, 2),
    };
    // A Forge chat run's answer is asked for streamed (it goes to the thread as a draft).
    openai_reply(&body, answer)
}

/// Fleet A's external agent `victor` (one run at a time), signing its wakes with
/// [`AGENT_SECRET`]; its webhook is pointed at fleet B once B listens.
async fn fleet_a_agent(a: &TestEnv) -> AgentId {
    a.external_agent(
        "victor",
        "https://fleet-b.invalid/agents/forge",
        AGENT_SECRET,
        1,
        EngagementMode::Execute,
    )
    .await
    .id
}

/// Fleet B: takes wakes signed with A's agent secret and runs its internal `victor` against
/// A's MCP surface with the key linked to A's `victor`.
async fn fleet_b(a: &Fleet, agent_key: &str, provider: &MockServer) -> (TestEnv, Fleet) {
    let mut b = TestEnv::new().await;
    let config = std::env::temp_dir().join(format!("{}-two-fleets.toml", b.ns));
    std::fs::write(
        &config,
        format!(
            "[mcp_servers.forge]\nurl = \"{}\"\nheaders = {{ Authorization = \"Bearer {agent_key}\" }}\ntimeout = 10\n",
            a.url("/api/mcp/rpc")
        ),
    )
    .unwrap();
    b.set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_FORGE_WEBHOOK_SECRETS", AGENT_SECRET)
        .openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test")
        .set("HERMES_CONFIG", config.to_str().unwrap());
    let victor = agent(&b, "default", "victor", AgentKind::Internal).await;
    let c = b.db().get().await.unwrap();
    // The streamed answer takes seven tool rounds.
    let rounds = AgentUpdate {
        max_tool_rounds: Some(8),
        ..AgentUpdate::default()
    };
    assert!(agents::update(&c, victor, &rounds).await.unwrap());
    drop(c);
    let fleet = b.start(&Service::ALL).await;
    let db = b.db();
    eventually(
        Duration::from_secs(30),
        "A's tools published on B",
        || async {
            let n = count(
                &db,
                "SELECT count(*) FROM tool_registry WHERE name = 'mcp_forge_chat_appendMessage'",
                &[],
            )
            .await;
            (n == 1).then_some(())
        },
    )
    .await;
    (b, fleet)
}

/// The open runs fleet A's `victor` holds.
async fn open_runs(a: &TestEnv, victor: AgentId) -> i64 {
    count(
        &a.db(),
        "SELECT count(*) FROM agent_runs WHERE agent_id = $1
           AND status NOT IN ('completed', 'failed', 'cancelled', 'expired')",
        &[&victor],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_b_answers_fleet_a_as_its_external_agent_and_streams_a_draft() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(model)
        .mount(&provider)
        .await;
    let peer = peer().await;
    let a = env_with(&peer).await;
    let user = a.user(Platform::Telegram, "4242", 5).await;
    let (rest_key_id, rest_key) = key(&a, None).await;
    let customer = a.key_user(rest_key_id, "customer-1", 5).await;
    // B's config names A's address and the key of A's victor; victor's webhook names B's
    // address. So victor is made first, its key linked (before any call could see the key
    // unlinked), A runs, B runs, and then victor's webhook is pointed at B.
    let victor = fleet_a_agent(&a).await;
    let (_, victor_key) = key(&a, Some(victor)).await;
    assign(&a, user.id, victor).await;
    assign(&a, customer.id, victor).await;
    let fleet_a = a.start(&Service::ALL).await;
    let (b, fleet_b) = fleet_b(&fleet_a, &victor_key, &provider).await;
    let url = fleet_b.url("/agents/forge");
    let to_b = AgentUpdate {
        webhook_url: Some(&url),
        ..AgentUpdate::default()
    };
    let c = a.db().get().await.unwrap();
    assert!(agents::update(&c, victor, &to_b).await.unwrap());
    drop(c);

    // A Telegram user of A is answered by B's agent through A's MCP surface.
    fleet_a
        .telegram_update(
            TG_SECRET,
            &telegram_text(4242, 1, "book a table for two at 8pm"),
        )
        .await;
    let sent = eventually(
        Duration::from_secs(60),
        "the Telegram user answered",
        || async {
            let sent = telegram_texts_to(&peer, "4242").await;
            sent.iter()
                .any(|t| t.contains("Table for two at 8pm is booked."))
                .then_some(sent)
        },
    )
    .await;
    assert_eq!(sent.len(), 1, "one answer, nothing doubled: {sent:?}");
    let run: String = {
        let c = a.db().get().await.unwrap();
        let id: uuid::Uuid = c
            .query_one(
                "SELECT id FROM agent_runs WHERE agent_id = $1 ORDER BY created_at LIMIT 1",
                &[&victor],
            )
            .await
            .unwrap()
            .get(0);
        id.to_string()
    };
    eventually(Duration::from_secs(30), "A's run completed", || async {
        (run_status(&a, &run).await == "completed").then_some(())
    })
    .await;
    let acked = count(
        &a.db(),
        "SELECT count(*) FROM agent_runs WHERE id = $1::text::uuid AND acked_at IS NOT NULL",
        &[&run],
    )
    .await;
    assert_eq!(acked, 1, "B acknowledged the run on A");
    assert_eq!(open_runs(&a, victor).await, 0, "the slot is free again");
    // On B, the wake was one run of its internal agent, ended.
    let b_runs = count(
        &b.db(),
        "SELECT count(*) FROM agent_runs WHERE platform = 'forge' AND status = 'completed'",
        &[],
    )
    .await;
    assert_eq!(b_runs, 1);
    // B's model answered with `chat.appendMessage` itself, so its whole answer finds the run
    // answered (RUN_ENDED): settled at once, not retried until parked.
    let b_db = b.db();
    eventually(
        Duration::from_secs(30),
        "B's whole answer settled",
        || async {
            let open = count(
                &b_db,
                "SELECT count(*) FROM forge_answers WHERE posted_at IS NULL",
                &[],
            )
            .await;
            let all = count(&b_db, "SELECT count(*) FROM forge_answers", &[]).await;
            (all == 1 && open == 0).then_some(())
        },
    )
    .await;
    let metrics = fleet_b.metrics().await;
    let answers = |outcome: &str| {
        hermes_testkit::metric(
            &metrics,
            &format!("hermes_forge_answers_total{{outcome=\"{outcome}\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert_eq!(
        (answers("run_ended"), answers("failed")),
        (1.0, 0.0),
        "{metrics}"
    );

    // An API caller of A (the REST channel, reading the run's events) sees B's draft stream.
    let http = reqwest::Client::new();
    let story = fleet_a
        .rest_message(&rest_key, "customer-1", "tell me a story")
        .await;
    // The run is readable once the router recorded it (a moment after the 202).
    let events_url = fleet_a.url(&format!("/v1/runs/{story}/events"));
    let mut events = eventually(Duration::from_secs(30), "the story's events", || async {
        let resp = http
            .get(&events_url)
            .bearer_auth(&rest_key)
            .send()
            .await
            .ok()?;
        (resp.status() == reqwest::StatusCode::OK).then_some(resp)
    })
    .await;
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !seen.contains("run.completed") {
        let Some(chunk) = tokio::time::timeout_at(deadline, events.chunk())
            .await
            .expect("the story's events arrive")
            .unwrap()
        else {
            break;
        };
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let deltas: Vec<&str> = seen
        .split("\n\n")
        .filter(|e| e.contains("event: message.delta"))
        .collect();
    assert_eq!(deltas.len(), CHUNKS.len(), "{seen}");
    for (event, chunk) in deltas.iter().zip(CHUNKS) {
        assert!(event.contains(chunk), "{event}");
    }
    let first_delta = seen.find("message.delta").unwrap();
    assert!(
        seen.find("run.completed").unwrap() > first_delta,
        "the deltas came before the end: {seen}"
    );
    eventually(Duration::from_secs(30), "the story completed", || async {
        (run_status(&a, &story).await == "completed").then_some(())
    })
    .await;
    assert_eq!(open_runs(&a, victor).await, 0);
    fleet_b.stop().await.unwrap();
    fleet_a.stop().await.unwrap();
    let _ = std::fs::remove_file(std::env::temp_dir().join(format!("{}-two-fleets.toml", b.ns)));
}
