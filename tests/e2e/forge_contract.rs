//! The Forge contract's conformance suite (docs/agents.md, "The contract, item by item"):
//! an agent written from the contract's text alone, with its tool names, fields, both
//! signatures and events, talks to Hermes unchanged. Each test drives one item of the
//! contract as the contract spells it; the table in docs/agents.md names them.

use std::time::Duration;

use hermes::Service;
use hermes_bus::Bus;
use hermes_testkit::{TestEnv, count, eventually, metric, telegram_text, telegram_texts_to};
use hermes_types::agent::EngagementMode;
use hermes_types::envelope::Envelope;
use hermes_types::ids::{AgentId, RunId};
use hermes_types::model::{Media, MediaKind, Platform};
use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;
use wiremock::{MockServer, Request};

use crate::agent_mcp::{
    AGENT_SECRET, Mcp, TG_SECRET, assign, env_with, external_agent, key, peer, run_status,
};
use crate::fake_forge::CONTRACT_TOOLS;

/// Publish a message of `platform` from `sender` (optionally with `media`): its run id.
pub(crate) async fn message(
    bus: &Bus,
    platform: Platform,
    sender: &str,
    text: &str,
    media: Vec<Media>,
) -> RunId {
    let run = RunId::new();
    let mut inbound = hermes_testkit::channel_inbound(platform, sender, text);
    inbound.event.media = media;
    bus.publish(&Envelope::new(run, None, &inbound))
        .await
        .unwrap();
    run
}

/// The wakes `peer` received for `run`, oldest first.
pub(crate) async fn wakes_of(peer: &MockServer, run: RunId) -> Vec<Request> {
    peer.received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.url.path() == "/agents/forge")
        .filter(|r| {
            serde_json::from_slice::<Value>(&r.body)
                .is_ok_and(|b| b["issue"]["id"] == json!(run) || b["run"]["id"] == json!(run))
        })
        .collect()
}

/// The first wake of `run`, once it came.
pub(crate) async fn wake(peer: &MockServer, run: RunId) -> Request {
    eventually(Duration::from_secs(30), "the agent's wake", || async {
        wakes_of(peer, run).await.into_iter().next()
    })
    .await
}

/// `sha256=<hex>` of HMAC-SHA256 over `data` with `secret`, as the contract signs.
fn signature(secret: &str, data: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(data);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// A header of `req`.
fn header(req: &Request, name: &str) -> Option<String> {
    req.headers
        .get(name)
        .map(|v| v.to_str().unwrap().to_string())
}

/// Check both of the contract's signatures of `req` under `secret`, as a receiver written
/// from the contract does: the timestamped one over `{timestamp}.{raw body}`, the other
/// over the raw body alone.
pub(crate) fn assert_signed_both_ways(req: &Request, secret: &str) {
    let ts = header(req, "x-forge-timestamp").expect("X-Forge-Timestamp");
    let skew = chrono::Utc::now().timestamp() - ts.parse::<i64>().unwrap();
    assert!(skew.abs() <= 300, "timestamp {ts} is outside the tolerance");
    let mut signed = format!("{ts}.").into_bytes();
    signed.extend_from_slice(&req.body);
    assert_eq!(
        header(req, "x-forge-signature").as_deref(),
        Some(signature(secret, &signed).as_str()),
        "X-Forge-Signature"
    );
    assert_eq!(
        header(req, "x-forge-body-signature").as_deref(),
        Some(signature(secret, &req.body).as_str()),
        "X-Forge-Body-Signature"
    );
}

/// The agent's runs the inbox lists with the contract's name, once `run` is among them.
pub(crate) async fn listed(mcp: &Mcp, run: RunId) -> Value {
    eventually(Duration::from_secs(30), "the run in the inbox", || async {
        let listed = mcp
            .call("agent.inbox.list", json!({"status": "unacked"}))
            .await
            .ok()?;
        listed["runs"]
            .as_array()?
            .iter()
            .find(|r| r["runId"] == json!(run))
            .cloned()
    })
    .await
}

/// Wait until `run` is closed as `status`.
pub(crate) async fn closed_as(env: &TestEnv, run: RunId, status: &str) {
    let id = run.to_string();
    eventually(Duration::from_secs(30), "the run closed", || async {
        (run_status(env, &id).await == status).then_some(())
    })
    .await;
}

/// A REST user assigned to an external agent `victor` (own secret), a key linked to it,
/// and the whole fleet.
async fn rest_setup(peer: &MockServer) -> (TestEnv, AgentId, String) {
    let env = env_with(peer).await;
    let victor = external_agent(&env, peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Rest, "forge-user", 10).await;
    assign(&env, user.id, victor).await;
    let (_, agent_key) = key(&env, Some(victor)).await;
    (env, victor, agent_key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_1_the_contracts_tool_names_answer_on_both_transports_beside_the_aliases() {
    let peer = peer().await;
    let (env, _, agent_key) = rest_setup(&peer).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    let mcp = Mcp::new(&fleet, &agent_key);

    let tools = mcp.rpc("tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in CONTRACT_TOOLS {
        assert!(names.contains(&name), "tools/list lacks {name}: {names:?}");
    }
    for alias in ["inbox.list", "inbox.ack", "context.bundle"] {
        assert!(!names.contains(&alias), "the alias {alias} is listed");
    }

    // JSON-RPC, the contract's loop and a streamed answer addressed by threadId.
    let first = message(&bus, Platform::Rest, "forge-user", "first", Vec::new()).await;
    let run = listed(&mcp, first).await;
    assert_eq!(
        (run["issueId"].clone(), run["threadId"].clone()),
        (json!(first), json!(first))
    );
    let me = mcp.ok("agents.me", json!({})).await;
    assert_eq!(me["profileKey"], "victor");
    let beat = mcp
        .ok("agents.heartbeat", json!({"status": "ONLINE"}))
        .await;
    assert_eq!(beat["status"], "ONLINE");
    let ack = mcp.ok("agent.inbox.ack", json!({"runId": first})).await;
    assert_eq!(ack["acked"], true);
    let bundle = mcp
        .ok("agent.context.bundle", json!({"issueId": first}))
        .await;
    assert_eq!(bundle["run"]["runId"], json!(first));
    assert_eq!(bundle["message"]["text"], "first");
    let draft = mcp.ok("chat.startDraft", json!({"threadId": first})).await;
    let draft_id = draft["draftId"].clone();
    assert_eq!(draft["threadId"], json!(first));
    let chunk = mcp
        .ok(
            "chat.appendDraftChunk",
            json!({"threadId": first, "draftId": draft_id, "delta": "Hello"}),
        )
        .await;
    assert_eq!(chunk["chunks"], 1);
    let done = mcp
        .ok(
            "chat.finalizeDraft",
            json!({"threadId": first, "draftId": draft_id, "body": "Hello there"}),
        )
        .await;
    assert_eq!(done["status"], "answered");
    closed_as(&env, first, "completed").await;

    // The REST alias, the same names and fields.
    let second = message(&bus, Platform::Rest, "forge-user", "second", Vec::new()).await;
    let run = eventually(Duration::from_secs(30), "the run over REST", || async {
        let (status, body) = mcp
            .rest("agent.inbox.list", json!({"status": "unacked"}))
            .await;
        (status == StatusCode::OK).then_some(())?;
        body["runs"].as_array()?.first().cloned()
    })
    .await;
    assert_eq!(run["runId"], json!(second));
    let (status, _) = mcp.rest("agent.inbox.ack", json!({"runId": second})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, bundle) = mcp
        .rest("agent.context.bundle", json!({"issueId": second}))
        .await;
    assert_eq!(
        (status, bundle["message"]["text"].clone()),
        (StatusCode::OK, json!("second"))
    );
    let (status, answered) = mcp
        .rest(
            "chat.appendMessage",
            json!({"threadId": second, "body": "Answered"}),
        )
        .await;
    assert_eq!(
        (status, answered["status"].clone()),
        (StatusCode::OK, json!("answered"))
    );
    closed_as(&env, second, "completed").await;

    // Today's short names still call the same tools, on both transports.
    let third = message(&bus, Platform::Rest, "forge-user", "third", Vec::new()).await;
    let run = mcp.next_run().await;
    assert_eq!(run["runId"], json!(third));
    let (status, _) = mcp.rest("inbox.ack", json!({"runId": third})).await;
    assert_eq!(status, StatusCode::OK);
    let bundle = mcp.ok("context.bundle", json!({"runId": third})).await;
    assert_eq!(bundle["message"]["text"], "third");
    // Two names of the run that disagree are refused.
    let refused = mcp
        .refused(
            "agent.context.bundle",
            json!({"issueId": third, "runId": first}),
        )
        .await;
    assert_eq!(refused["code"], "INVALID_ARGUMENT");
    mcp.ok("chat.appendMessage", json!({"runId": third, "body": "ok"}))
        .await;
    closed_as(&env, third, "completed").await;

    // Calls are counted under the contract's name, whichever name called the tool.
    let m = fleet.metrics().await;
    let bundles = metric(
        &m,
        r#"hermes_mcp_calls_total{outcome="ok",tool="agent.context.bundle"}"#,
    );
    assert_eq!(bundles, Some(3.0), "{m}");
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_2_the_wake_carries_the_contracts_envelope_signed_both_ways() {
    let peer = peer().await;
    let (env, victor, _) = rest_setup(&peer).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;
    let run = message(
        &bus,
        Platform::Rest,
        "forge-user",
        "please review AXI-42\nthanks",
        Vec::new(),
    )
    .await;

    let req = wake(&peer, run).await;
    assert_signed_both_ways(&req, AGENT_SECRET);
    let body: Value = serde_json::from_slice(&req.body).unwrap();
    let c = env.db().get().await.unwrap();
    let workspace: uuid::Uuid = c
        .query_one("SELECT id FROM workspaces WHERE slug = 'default'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(body["workspace"]["id"], json!(workspace));
    assert_eq!(body["workspace"]["slug"], "default");
    assert_eq!(body["workspace"]["key"], "DEFAULT");
    assert_eq!(body["agent"], json!({"id": victor, "profileKey": "victor"}));
    assert_eq!(body["issue"]["id"], json!(run));
    let key = body["issue"]["key"].as_str().unwrap();
    assert!(
        key.starts_with("DEFAULT-") && run.to_string().to_ascii_uppercase().ends_with(&key[8..]),
        "{key}"
    );
    assert_eq!(body["issue"]["title"], "please review AXI-42");
    assert_eq!(body["dispatch"]["mode"], "ASSIGNED");
    assert_eq!(body["dispatch"]["chosen"], json!(victor));
    assert!(
        body["dispatch"]["reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
    );
    // Hermes's own fields stay, under their own names.
    assert_eq!(body["run"]["id"], json!(run));
    assert_eq!(body["engagement_mode"], "EXECUTE");
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_2_an_agent_without_a_secret_is_signed_with_the_workspace_secret() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let url = format!("{}/agents/forge", peer.uri());
    let create = [
        "agents",
        "create",
        "victor",
        "--kind",
        "external",
        "--name",
        "Victor",
        "--webhook-url",
        url.as_str(),
        "--workspace-secret",
    ];
    // No workspace secret yet: the agent cannot be made without one of its own.
    let (code, out, err) = env.hermes(&create).await;
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("has no signing secret"), "{err}");

    let (code, out, err) = env.hermes(&["workspaces", "signing-secret"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let secret = out
        .split_whitespace()
        .find(|w| w.starts_with("whsec_"))
        .expect("the secret is printed")
        .to_string();
    let (code, out, err) = env.hermes(&["workspaces", "signing-secret"]).await;
    assert_ne!(
        code, 0,
        "a second secret replaces the first only with --rotate: {out}"
    );
    assert!(err.contains("--rotate"), "{err}");
    let (code, out, err) = env.hermes(&create).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        !out.contains("whsec_"),
        "no secret of its own is made: {out}"
    );

    let c = env.db().get().await.unwrap();
    let row = c
        .query_one(
            "SELECT id, webhook_secret_enc IS NULL FROM agents WHERE profile_key = 'victor'",
            &[],
        )
        .await
        .unwrap();
    let victor: AgentId = row.get(0);
    assert!(row.get::<_, bool>(1), "the agent has no secret of its own");
    let user = env.user(Platform::Rest, "forge-user", 5).await;
    assign(&env, user.id, victor).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;
    let run = message(&bus, Platform::Rest, "forge-user", "hello", Vec::new()).await;
    let req = wake(&peer, run).await;
    assert_signed_both_ways(&req, &secret);
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_3_a_persons_chat_message_wakes_as_chat_message_posted_with_its_thread() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Telegram, "4242", 5).await;
    assign(&env, user.id, victor).await;
    let (_, agent_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&Service::ALL).await;
    let mcp = Mcp::new(&fleet, &agent_key);

    fleet
        .telegram_update(
            TG_SECRET,
            &telegram_text(4242, 9, "a table for two at eight"),
        )
        .await;
    let req = eventually(Duration::from_secs(30), "the agent's wake", || async {
        peer.received_requests()
            .await?
            .into_iter()
            .find(|r| r.url.path() == "/agents/forge")
    })
    .await;
    assert_eq!(
        header(&req, "x-forge-event").as_deref(),
        Some("CHAT_MESSAGE_POSTED")
    );
    assert_signed_both_ways(&req, AGENT_SECRET);
    let body: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(body["kind"], "CHAT_MESSAGE_POSTED");
    let thread = body["threadId"].as_str().expect("threadId").to_string();
    assert_eq!(body["issue"]["id"], json!(thread));
    let run: uuid::Uuid = thread.parse().unwrap();
    // Recorded as the wake's event, and with the dispatch.
    let recorded = count(
        &env.db(),
        "SELECT count(*) FROM webhook_deliveries WHERE run_id = $1 AND event = 'CHAT_MESSAGE_POSTED'",
        &[&run],
    )
    .await;
    assert_eq!(recorded, 1);
    let dispatched = count(
        &env.db(),
        "SELECT count(*) FROM activity_events WHERE run_id = $1 AND kind = 'run.dispatched'
           AND data ->> 'wake_event' = 'CHAT_MESSAGE_POSTED'",
        &[&run],
    )
    .await;
    assert_eq!(dispatched, 1);

    // The contract's single-shot reply, addressed by the wake's threadId.
    mcp.ok("agent.inbox.ack", json!({"runId": thread})).await;
    let answered = mcp
        .ok(
            "chat.appendMessage",
            json!({"threadId": thread, "body": "Booked: 8pm."}),
        )
        .await;
    assert_eq!(answered["threadId"], json!(thread));
    eventually(
        Duration::from_secs(30),
        "the answer on Telegram",
        || async {
            telegram_texts_to(&peer, "4242")
                .await
                .contains(&"Booked: 8pm.".to_string())
                .then_some(())
        },
    )
    .await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_8_the_bundle_and_every_rewake_carry_the_messages_attachments() {
    let peer = peer().await;
    let mut env = env_with(&peer).await;
    env.set("HERMES_AGENT_REWAKE_DELAYS", "1s");
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Telegram, "4242", 5).await;
    assign(&env, user.id, victor).await;
    let (_, agent_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    let mcp = Mcp::new(&fleet, &agent_key);
    let photo = Media {
        kind: MediaKind::Image,
        platform_id: Some("AgACAgQ-large".into()),
        url: None,
        mime_type: Some("image/jpeg".into()),
    };
    let run = message(
        &bus,
        Platform::Telegram,
        "4242",
        "what is this?",
        vec![photo],
    )
    .await;
    let expected = json!([{
        "kind": "image", "platform": "telegram", "file_id": "AgACAgQ-large",
        "url": null, "mime_type": "image/jpeg",
    }]);

    // The first wake and its re-wake (the run is not acknowledged yet) both name the file.
    let wakes = eventually(Duration::from_secs(30), "a wake and a re-wake", || async {
        let wakes = wakes_of(&peer, run).await;
        (wakes.len() >= 2).then_some(wakes)
    })
    .await;
    for w in &wakes[..2] {
        let body: Value = serde_json::from_slice(&w.body).unwrap();
        assert_eq!(body["run"]["attachments"], expected, "{body}");
    }
    let ids: Vec<_> = wakes
        .iter()
        .map(|w| header(w, "x-forge-delivery"))
        .collect();
    assert_ne!(ids[0], ids[1], "a re-wake is a new wake");

    mcp.ok("agent.inbox.ack", json!({"runId": run})).await;
    let bundle = mcp
        .ok("agent.context.bundle", json!({"issueId": run}))
        .await;
    assert_eq!(bundle["message"]["attachments"], expected, "{bundle}");
    mcp.ok(
        "chat.appendMessage",
        json!({"threadId": run, "body": "A cat."}),
    )
    .await;
    closed_as(&env, run, "completed").await;
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_mcp_sdk_calls_the_contracts_names() {
    if !crate::agent_mcp_sdk::sdk_installed().await {
        return;
    }
    let peer = peer().await;
    let (env, _, agent_key) = rest_setup(&peer).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    let run = message(
        &bus,
        Platform::Rest,
        "forge-user",
        "from the SDK",
        Vec::new(),
    )
    .await;
    let mcp = Mcp::new(&fleet, &agent_key);
    listed(&mcp, run).await;
    crate::agent_mcp_sdk::run_script(
        "forge-contract-agent.mjs",
        &[
            ("HERMES_MCP_URL", fleet.url("/api/mcp")),
            ("HERMES_AGENT_KEY", agent_key.clone()),
        ],
    )
    .await;
    closed_as(&env, run, "completed").await;
    bus.close().await;
    fleet.stop().await.unwrap();
}
