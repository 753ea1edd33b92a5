//! The agent MCP surface end to end (docs/agents.md, "The agent's side"): a user's message
//! is dispatched to an external agent, which (over HTTP, as any agent runtime would) lists
//! its inbox, acknowledges, reads the context bundle and answers; the user's channel gets
//! the answer and the run closes. Failures are told and refunded once. Drafts are in
//! `agent_mcp_drafts`, refusals and bad input in `agent_mcp_refusals`, the official SDK as
//! the agent in `agent_mcp_sdk`; they share the helpers here.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{
    Fleet, TestEnv, count, eventually, metric, telegram_send_message, telegram_text,
    telegram_texts_to,
};
use hermes_types::agent::EngagementMode;
use hermes_types::ids::{AgentId, ApiKeyId, UserId};
use hermes_types::model::Platform;
use reqwest::StatusCode;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

pub(crate) const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
pub(crate) const AGENT_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
pub(crate) const TG_TOKEN: &str = "123456:test-bot-token";
pub(crate) const TG_SECRET: &str = "tg-secret-0123456789";

/// A fake of the agent's webhook endpoint and of the Telegram Bot API, in one server.
pub(crate) async fn peer() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/agents/forge"))
        .respond_with(ResponseTemplate::new(202))
        .mount(&server)
        .await;
    telegram_send_message(TG_TOKEN)
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "result": {"message_id": 1}})),
        )
        .mount(&server)
        .await;
    // A draft shown on Telegram is edited as it grows and replaced by the answer.
    Mock::given(method("POST"))
        .and(path(format!("/bot{TG_TOKEN}/editMessageText")))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "result": {"message_id": 1}})),
        )
        .mount(&server)
        .await;
    server
}

/// A test environment whose agent wakes and Telegram sends go to `peer`.
pub(crate) async fn env_with(peer: &MockServer) -> TestEnv {
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_WEBHOOK_ALLOW", "127.0.0.1")
        .set("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .set("TELEGRAM_API_BASE_URL", &peer.uri())
        .set("TELEGRAM_WEBHOOK_SECRET", TG_SECRET)
        .set("HERMES_SEND_PAUSES_MS", "10,10,10");
    env
}

/// An external agent `profile_key` in `mode`, woken at `peer`'s `/agents/forge`.
pub(crate) async fn external_agent(
    env: &TestEnv,
    peer: &MockServer,
    profile_key: &str,
    mode: EngagementMode,
) -> AgentId {
    let url = format!("{}/agents/forge", peer.uri());
    env.external_agent(profile_key, &url, AGENT_SECRET, 5, mode)
        .await
        .id
}

/// A new API key (scope `messages`), linked to `agent` when given: (id, key).
pub(crate) async fn key(env: &TestEnv, agent: Option<AgentId>) -> (ApiKeyId, String) {
    let c = env.db().get().await.unwrap();
    let created = hermes_db::api_keys::create(&c, "agent-key", None, None)
        .await
        .unwrap();
    if let Some(a) = agent {
        assert!(
            hermes_db::api_keys::set_agent(&c, created.key.id, a)
                .await
                .unwrap()
        );
    }
    (created.key.id, created.secret_key)
}

/// Assign `user` to `agent` (dispatch then always picks it).
pub(crate) async fn assign(env: &TestEnv, user: UserId, agent: AgentId) {
    let c = env.db().get().await.unwrap();
    hermes_db::users::update(&c, user, None, None, Some(Some(agent)))
        .await
        .unwrap();
}

/// An agent runtime's view of the MCP surface: one key, both transports. (The operator
/// server's tests use it too, at `/mcp`, without the REST alias.)
pub(crate) struct Mcp {
    http: reqwest::Client,
    base: String,
    rpc: String,
    key: String,
}

impl Mcp {
    pub(crate) fn new(fleet: &Fleet, key: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: fleet.url("/api/mcp"),
            rpc: fleet.url("/api/mcp/rpc"),
            key: key.to_string(),
        }
    }

    /// The operator MCP server (`POST /mcp`) with `key`.
    pub(crate) fn operator(fleet: &Fleet, key: &str) -> Self {
        Self {
            rpc: fleet.url("/mcp"),
            ..Self::new(fleet, key)
        }
    }

    /// The same endpoint with another key.
    pub(crate) fn with_key(&self, key: &str) -> Self {
        Self {
            http: self.http.clone(),
            base: self.base.clone(),
            rpc: self.rpc.clone(),
            key: key.to_string(),
        }
    }

    /// POST `body` (raw) to the JSON-RPC endpoint: the status and the JSON answer (Null if
    /// none).
    pub(crate) async fn post_raw(&self, body: impl Into<reqwest::Body>) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(&self.rpc)
            .bearer_auth(&self.key)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// One JSON-RPC request; the whole answer (asserted 200).
    pub(crate) async fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let (status, answer) = self.post_raw(body.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{method}: {answer}");
        answer
    }

    /// `tools/call`: the structured result, or the structured error of a refusal.
    pub(crate) async fn call(&self, tool: &str, args: Value) -> Result<Value, Value> {
        let answer = self
            .rpc("tools/call", json!({"name": tool, "arguments": args}))
            .await;
        let result = &answer["result"];
        assert!(result.is_object(), "{tool}: {answer}");
        if result["isError"] == true {
            Err(result["structuredContent"]["error"].clone())
        } else {
            let content = result["structuredContent"].clone();
            // The text content says the same as the structured one.
            let text: Value =
                serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
            assert_eq!(text, content);
            Ok(content)
        }
    }

    /// A call that must succeed.
    pub(crate) async fn ok(&self, tool: &str, args: Value) -> Value {
        match self.call(tool, args).await {
            Ok(v) => v,
            Err(e) => panic!("{tool} refused: {e}"),
        }
    }

    /// The refusal code of a call that must fail.
    pub(crate) async fn refused(&self, tool: &str, args: Value) -> Value {
        match self.call(tool, args).await {
            Ok(v) => panic!("{tool} should be refused, answered {v}"),
            Err(e) => e,
        }
    }

    /// The REST alias: status and JSON body.
    pub(crate) async fn rest(&self, tool: &str, body: Value) -> (StatusCode, Value) {
        let resp = self
            .http
            .post(format!("{}/{tool}", self.base))
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// The agent's first unacknowledged run, once one is there.
    pub(crate) async fn next_run(&self) -> Value {
        eventually(Duration::from_secs(30), "a run in the inbox", || async {
            let listed = self.call("inbox.list", json!({})).await.ok()?;
            listed["runs"].as_array()?.first().cloned()
        })
        .await
    }
}

/// A run's status column.
pub(crate) async fn run_status(env: &TestEnv, run: &str) -> String {
    let c = env.db().get().await.unwrap();
    let id: uuid::Uuid = run.parse().unwrap();
    c.query_one("SELECT status FROM agent_runs WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_agent_answers_a_telegram_user_through_the_mcp_surface() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Telegram, "4242", 5).await;
    // A second chat of the same user, which the agent may write to.
    let c = env.db().get().await.unwrap();
    let scope = hermes_db::users::ChannelScope::from(Platform::Telegram);
    assert!(
        hermes_db::users::link_channel(&c, user.id, scope, "777", true, None)
            .await
            .unwrap()
    );
    assign(&env, user.id, victor).await;
    let (_, agent_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&Service::ALL).await;
    let mcp = Mcp::new(&fleet, &agent_key);

    let init = mcp
        .rpc(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "1"}}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert!(init["result"]["capabilities"]["tools"].is_object());
    let tools = mcp.rpc("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 12, "{names:?}");
    assert!(names.contains(&"chat.appendMessage") && names.contains(&"agent.inbox.ack"));

    fleet
        .telegram_update(
            TG_SECRET,
            &telegram_text(4242, 7, "book me a table for two"),
        )
        .await;
    let run = mcp.next_run().await;
    let run_id = run["runId"].as_str().unwrap().to_string();
    assert_eq!(run["text"], "book me a table for two");
    assert_eq!(run["platform"], "telegram");
    assert_eq!(run["engagementMode"], "EXECUTE");
    let me = mcp.ok("agents.me", json!({})).await;
    assert_eq!(me["profileKey"], "victor");
    assert_eq!(me["openRuns"], 1);

    let ack = mcp.ok("inbox.ack", json!({"runId": run_id})).await;
    assert_eq!(ack["first"], true);
    let again = mcp.ok("inbox.ack", json!({"runId": run_id})).await;
    assert_eq!(
        (again["first"].clone(), again["ackedAt"].clone()),
        (json!(false), ack["ackedAt"].clone())
    );
    let unacked = mcp.ok("inbox.list", json!({"status": "unacked"})).await;
    assert_eq!(unacked["runs"], json!([]));
    let acked = mcp.ok("inbox.list", json!({"status": "acked"})).await;
    assert_eq!(acked["runs"][0]["runId"], run_id.as_str());
    let acks = count(
        &env.db(),
        "SELECT count(*) FROM activity_events WHERE kind = 'run.acked'",
        &[],
    )
    .await;
    assert_eq!(acks, 1, "one activity event for the first ack only");

    let bundle = mcp.ok("context.bundle", json!({"runId": run_id})).await;
    assert_eq!(bundle["message"]["text"], "book me a table for two");
    assert_eq!(bundle["conversation"][0]["text"], "book me a table for two");
    assert_eq!(bundle["user"]["id"], json!(user.id));
    let protocol = &bundle["runProtocol"];
    assert_eq!(protocol["runId"], run_id.as_str());
    assert_eq!(protocol["engagementMode"], "EXECUTE");
    assert_eq!(protocol["mutationAllowed"], true);
    assert_eq!(
        protocol["contractVersion"],
        hermes_types::agent::CONTRACT_VERSION
    );

    // EXECUTE may write memory and message another chat of the user, not a stranger's.
    mcp.ok(
        "memory.remember",
        json!({"runId": run_id, "key": "diet", "value": "pescatarian"}),
    )
    .await;
    let bundle = mcp.ok("context.bundle", json!({"runId": run_id})).await;
    assert_eq!(bundle["user"]["memory"]["diet"], "pescatarian");
    let sent = mcp
        .ok(
            "chat.sendMessage",
            json!({"runId": run_id, "platform": "telegram", "chatId": "777", "body": "see you at 8"}),
        )
        .await;
    assert_eq!(sent["status"], "queued");
    let stranger = mcp
        .refused(
            "chat.sendMessage",
            json!({"runId": run_id, "platform": "telegram", "chatId": "9999", "body": "hi"}),
        )
        .await;
    assert_eq!(stranger["code"], "INVALID_ARGUMENT");

    let answered = mcp
        .ok(
            "chat.appendMessage",
            json!({"runId": run_id, "body": "Booked: 8pm, two people."}),
        )
        .await;
    assert_eq!(answered["status"], "answered");
    let second = mcp
        .refused(
            "chat.appendMessage",
            json!({"runId": run_id, "body": "again"}),
        )
        .await;
    assert_eq!(second["code"], "RUN_ENDED");

    eventually(
        Duration::from_secs(30),
        "the answer in the chat",
        || async {
            let sent = telegram_texts_to(&peer, "4242").await;
            sent.iter()
                .any(|t| t == "Booked: 8pm, two people.")
                .then_some(())
        },
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "the other chat's message",
        || async {
            let sent = telegram_texts_to(&peer, "777").await;
            (sent == ["see you at 8"]).then_some(())
        },
    )
    .await;
    eventually(Duration::from_secs(30), "the run completed", || async {
        (run_status(&env, &run_id).await == "completed").then_some(())
    })
    .await;
    assert_eq!(
        telegram_texts_to(&peer, "4242").await,
        ["Booked: 8pm, two people."]
    );
    let me = mcp.ok("agents.me", json!({})).await;
    assert_eq!(me["openRuns"], 0, "the slot is free again");
    let model: String = c
        .query_one(
            "SELECT model FROM agent_runs WHERE id = $1",
            &[&run_id.parse::<uuid::Uuid>().unwrap()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(model, "agent:victor");
    let metrics = fleet.metrics().await;
    assert_eq!(
        metric(
            &metrics,
            "hermes_agent_runs_total{agent=\"victor\",outcome=\"answered\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &metrics,
            "hermes_mcp_calls_total{outcome=\"RUN_ENDED\",tool=\"chat.appendMessage\"}"
        ),
        Some(1.0)
    );
    assert!(metrics.contains("hermes_agent_time_to_ack_seconds_count{agent=\"victor\"} 1"));
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_fail_tells_the_user_and_refunds_the_credit_once() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Review).await;
    let user = env.user(Platform::Telegram, "4242", 5).await;
    assign(&env, user.id, victor).await;
    let (_, agent_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&Service::ALL).await;
    let mcp = Mcp::new(&fleet, &agent_key);

    fleet
        .telegram_update(
            TG_SECRET,
            &telegram_text(4242, 8, "can you fix my invoice?"),
        )
        .await;
    let run_id = mcp.next_run().await["runId"].as_str().unwrap().to_string();
    // Giving up is the run's own reply: allowed in REVIEW.
    let failed = mcp
        .ok(
            "runs.fail",
            json!({"runId": run_id, "reason": "billing API down token=sk-live-abcdef123456"}),
        )
        .await;
    assert_eq!(failed["status"], "failed");
    let again = mcp
        .refused("runs.fail", json!({"runId": run_id, "reason": "twice"}))
        .await;
    assert_eq!(again["code"], "RUN_ENDED");
    let late = mcp
        .refused(
            "chat.appendMessage",
            json!({"runId": run_id, "body": "late answer"}),
        )
        .await;
    assert_eq!(late["code"], "RUN_ENDED");

    eventually(
        Duration::from_secs(30),
        "the failure told in the chat",
        || async {
            let sent = telegram_texts_to(&peer, "4242").await;
            (!sent.is_empty()).then_some(())
        },
    )
    .await;
    eventually(Duration::from_secs(30), "the run failed", || async {
        (run_status(&env, &run_id).await == "failed").then_some(())
    })
    .await;
    assert_eq!(
        telegram_texts_to(&peer, "4242").await,
        [hermes_ingest_failed_text()],
        "one failure message, nothing else"
    );
    let c = env.db().get().await.unwrap();
    let id: uuid::Uuid = run_id.parse().unwrap();
    let row = c
        .query_one(
            "SELECT error_code, error_detail FROM agent_runs WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "agent_failed");
    let detail: String = row.get(1);
    assert!(detail.contains("billing API down"), "{detail}");
    assert!(
        !detail.contains("sk-live-abcdef123456"),
        "the reason is scrubbed: {detail}"
    );
    let refunds = count(
        &env.db(),
        "SELECT count(*) FROM credit_ledger WHERE run_id = $1 AND reason = 'refund'",
        &[&id],
    )
    .await;
    assert_eq!(refunds, 1);
    let credits: i64 = c
        .query_one("SELECT credits FROM users WHERE id = $1", &[&user.id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(credits, 5, "the charge came back");
    assert_eq!(mcp.ok("agents.me", json!({})).await["openRuns"], 0);
    assert_eq!(
        metric(
            &fleet.metrics().await,
            "hermes_agent_runs_total{agent=\"victor\",outcome=\"failed\"}"
        ),
        Some(1.0)
    );
    fleet.stop().await.unwrap();
}

/// The user-facing text of `runs.fail` (as docs/agents.md quotes it).
fn hermes_ingest_failed_text() -> &'static str {
    "Sorry, the agent could not answer this message. Your credit was not used; please try again later."
}
