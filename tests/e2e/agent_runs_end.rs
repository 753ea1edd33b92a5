//! External runs end (docs/agents.md, "When an external run ends"): a run its agent never
//! answers gets the fallback reply in the user's chat past the agent's reply deadline, one
//! refund, ends `expired` and frees the agent's slot; an answer claimed first means no
//! fallback; an unacknowledged run is woken again with a new delivery id while an
//! acknowledged one is not; a silent agent is passed over and marked OFFLINE, until a
//! heartbeat brings it back.

use std::time::Duration;

use hermes::Service;
use hermes_db::agents::{self, AgentUpdate};
use hermes_db::inbox;
use hermes_router::external::expiry::EXPIRED_TEXT;
use hermes_testkit::{TestEnv, count, eventually, metric, send_on, telegram_fake};
use hermes_types::agent::{AgentStatus, EngagementMode};
use hermes_types::ids::{AgentId, RunId};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const AGENT_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const TG_TOKEN: &str = "123456:agent-runs-end";

/// The fakes of one test: the agent's webhook (202 to every wake) and Telegram's Bot API.
struct Fakes {
    agent: MockServer,
    telegram: MockServer,
}

/// Fakes, and an environment whose external agents may be woken on loopback and whose
/// delivery stage sends Telegram replies to the fake.
async fn setup() -> (Fakes, TestEnv) {
    let agent = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/agents/forge"))
        .respond_with(ResponseTemplate::new(202))
        .mount(&agent)
        .await;
    let telegram = telegram_fake(TG_TOKEN).await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_WEBHOOK_ALLOW", "127.0.0.1")
        .set("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .set("TELEGRAM_API_BASE_URL", &telegram.uri());
    (Fakes { agent, telegram }, env)
}

/// An ONLINE external agent `victor` waking `fakes.agent`, with `max_concurrent` slots and
/// a reply deadline of `deadline_secs`.
async fn victor(env: &TestEnv, fakes: &Fakes, max_concurrent: i32, deadline_secs: i32) -> AgentId {
    let url = format!("{}/agents/forge", fakes.agent.uri());
    let agent = env
        .external_agent(
            "victor",
            &url,
            AGENT_SECRET,
            max_concurrent,
            EngagementMode::Review,
        )
        .await;
    let change = AgentUpdate {
        reply_deadline_secs: Some(deadline_secs),
        ..AgentUpdate::default()
    };
    let c = env.db().get().await.unwrap();
    assert!(agents::update(&c, agent.id, &change).await.unwrap());
    agent.id
}

/// The run's agent once it is routed (`Some(None)`: routed to the persona).
async fn routed_to(env: &TestEnv, run: RunId) -> Option<Option<AgentId>> {
    let c = env.db().get().await.ok()?;
    c.query_opt(
        "SELECT agent_id FROM agent_runs WHERE id = $1 AND dispatch IS NOT NULL",
        &[&run.as_uuid()],
    )
    .await
    .ok()?
    .map(|r| r.get(0))
}

/// The run's status (`none` before the router recorded it).
async fn status(env: &TestEnv, run: RunId) -> String {
    let c = env.db().get().await.unwrap();
    c.query_opt(
        "SELECT status FROM agent_runs WHERE id = $1",
        &[&run.as_uuid()],
    )
    .await
    .unwrap()
    .map_or_else(|| "none".into(), |r| r.get(0))
}

/// The texts the Telegram fake was asked to send.
async fn sent_texts(telegram: &MockServer) -> Vec<String> {
    telegram
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect()
}

/// The wakes the agent received for `run`: their `X-Forge-Delivery` ids, in order.
async fn wakes_of(agent: &MockServer, run: RunId) -> Vec<String> {
    agent
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| {
            serde_json::from_slice::<Value>(&r.body)
                .is_ok_and(|b| b["run"]["id"] == json!(run) && b["kind"] == "CHAT_MESSAGE_POSTED")
        })
        .filter_map(|r| r.headers.get("x-forge-delivery"))
        .map(|v| v.to_str().unwrap().to_string())
        .collect()
}

async fn refunds(env: &TestEnv, run: RunId) -> i64 {
    count(
        &env.db(),
        "SELECT count(*) FROM credit_ledger WHERE run_id = $1 AND reason = 'refund'",
        &[&run.as_uuid()],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_never_answers_expires_its_run_with_a_fallback_one_refund_and_a_free_slot() {
    let (fakes, env) = setup().await;
    let agent = victor(&env, &fakes, 1, 2).await;
    env.user(Platform::Telegram, "7001", 5).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;

    let first = send_on(&bus, Platform::Telegram, "7001", "please look at AXI-42").await;
    let chosen = eventually(Duration::from_secs(20), "the first run routed", || async {
        routed_to(&env, first).await
    })
    .await;
    assert_eq!(chosen, Some(agent), "round robin chose the agent");
    eventually(Duration::from_secs(20), "the agent woken", || async {
        (!wakes_of(&fakes.agent, first).await.is_empty()).then_some(())
    })
    .await;

    // Past the 2 s deadline: the chat gets the fallback, the run ends expired, refunded once.
    eventually(
        Duration::from_secs(30),
        "the fallback reply sent",
        || async {
            sent_texts(&fakes.telegram)
                .await
                .contains(&EXPIRED_TEXT.to_string())
                .then_some(())
        },
    )
    .await;
    eventually(
        Duration::from_secs(20),
        "the run closed expired",
        || async { (status(&env, first).await == "expired").then_some(()) },
    )
    .await;
    assert_eq!(refunds(&env, first).await, 1, "one refund");
    assert_eq!(
        sent_texts(&fakes.telegram).await,
        vec![EXPIRED_TEXT.to_string()],
        "the fallback, once"
    );
    let m = fleet.metrics().await;
    assert_eq!(
        metric(
            &m,
            r#"hermes_agent_runs_total{agent="victor",outcome="expired"}"#
        ),
        Some(1.0)
    );

    // The slot is free again: with max_concurrent 1, the next message goes to the agent.
    let second = send_on(&bus, Platform::Telegram, "7001", "and AXI-43?").await;
    let chosen = eventually(Duration::from_secs(20), "the second run routed", || async {
        routed_to(&env, second).await
    })
    .await;
    assert_eq!(
        chosen,
        Some(agent),
        "the expired run freed the agent's slot"
    );
    let c = env.db().get().await.unwrap();
    let row = c
        .query_one(
            "SELECT wakes, deadline_at > created_at, answered_at IS NULL FROM agent_runs WHERE id = $1",
            &[&second.as_uuid()],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i32>(0), 1, "dispatch counts the first wake");
    assert!(row.get::<_, bool>(1), "the deadline is set at dispatch");
    assert!(row.get::<_, bool>(2));

    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_claimed_before_the_deadline_gets_no_fallback() {
    let (fakes, env) = setup().await;
    let agent = victor(&env, &fakes, 2, 2).await;
    env.user(Platform::Telegram, "7101", 5).await;
    env.user(Platform::Telegram, "7102", 5).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;

    let answered = send_on(&bus, Platform::Telegram, "7101", "answered in time").await;
    eventually(
        Duration::from_secs(20),
        "the answered run routed",
        || async { routed_to(&env, answered).await },
    )
    .await;
    // The agent's answer, as the MCP surface claims it (its reply is the MCP surface's own).
    let db = env.db();
    let mut c = db.get().await.unwrap();
    let tx = c.transaction().await.unwrap();
    let claimed = inbox::claim_reply(&tx, answered, Some(agent))
        .await
        .unwrap();
    assert!(claimed.is_ok(), "{claimed:?}");
    tx.commit().await.unwrap();
    drop(c);
    let ignored = send_on(&bus, Platform::Telegram, "7102", "never answered").await;

    // The later deadline passes and is swept: the earlier one was swept by then too.
    eventually(
        Duration::from_secs(30),
        "the unanswered run expired",
        || async { (status(&env, ignored).await == "expired").then_some(()) },
    )
    .await;
    assert_eq!(status(&env, answered).await, "routed", "left to its answer");
    assert_eq!(refunds(&env, answered).await, 0);
    assert_eq!(
        sent_texts(&fakes.telegram).await,
        vec![EXPIRED_TEXT.to_string()],
        "one fallback: the unanswered run's"
    );
    let requests = fakes.telegram.received_requests().await.unwrap();
    let to: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(to["chat_id"].to_string().trim_matches('"'), "7102");

    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unacked_run_is_woken_again_with_a_new_delivery_id_and_an_acked_one_is_not() {
    let (fakes, mut env) = setup().await;
    env.set("HERMES_AGENT_REWAKE_DELAYS", "2s,2s");
    let agent = victor(&env, &fakes, 5, 600).await;
    env.user(Platform::Telegram, "7201", 5).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;

    let acked = send_on(&bus, Platform::Telegram, "7201", "acked at once").await;
    eventually(Duration::from_secs(20), "the acked run routed", || async {
        routed_to(&env, acked).await
    })
    .await;
    // The agent acknowledges it, as `inbox.ack` does (the MCP surface's own).
    let c = env.db().get().await.unwrap();
    c.execute(
        "UPDATE agent_runs SET acked_at = now() WHERE id = $1",
        &[&acked.as_uuid()],
    )
    .await
    .unwrap();
    let ignored = send_on(&bus, Platform::Telegram, "7201", "never acked").await;

    // Two re-wakes, each a new delivery, then no more (the schedule has two delays).
    let ids = eventually(Duration::from_secs(40), "two re-wakes", || async {
        let ids = wakes_of(&fakes.agent, ignored).await;
        (ids.len() == 3).then_some(ids)
    })
    .await;
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        3,
        "every wake has its own X-Forge-Delivery: {ids:?}"
    );
    let row = c
        .query_one(
            "SELECT wakes, (SELECT count(*) FROM webhook_deliveries d WHERE d.run_id = r.id)
             FROM agent_runs r WHERE id = $1",
            &[&ignored.as_uuid()],
        )
        .await
        .unwrap();
    assert_eq!((row.get::<_, i32>(0), row.get::<_, i64>(1)), (3, 3));
    // The acked run was due first; it was woken once.
    assert_eq!(wakes_of(&fakes.agent, acked).await.len(), 1);
    let wakes: i32 = c
        .query_one(
            "SELECT wakes FROM agent_runs WHERE id = $1",
            &[&acked.as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(wakes, 1);
    // A re-wake carries the first wake's envelope: same run, agent and dispatch.
    let bodies: Vec<Value> = fakes
        .agent
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .filter(|b: &Value| b["run"]["id"] == json!(ignored))
        .collect();
    let (first, last) = (&bodies[0], &bodies[2]);
    for field in [
        "agent",
        "dispatch",
        "engagement_mode",
        "tool_allowlist",
        "runtime_policy",
    ] {
        assert_eq!(first[field], last[field], "{field}");
    }
    assert_eq!(last["run"]["text"], "never acked");
    assert_eq!(last["agent"]["id"], json!(agent));
    let m = fleet.metrics().await;
    assert_eq!(
        metric(&m, r#"hermes_agent_rewakes_total{agent="victor"}"#),
        Some(2.0)
    );

    drop(c);
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_agent_is_not_chosen_and_is_marked_offline() {
    let (fakes, env) = setup().await;
    let agent = victor(&env, &fakes, 5, 600).await;
    // Heard from an hour ago, past the default presence window (15 minutes); still ONLINE.
    let c = env.db().get().await.unwrap();
    c.execute(
        "UPDATE agents SET last_heartbeat_at = now() - interval '1 hour', status = $2 WHERE id = $1",
        &[&agent, &AgentStatus::Online.as_str()],
    )
    .await
    .unwrap();
    env.user(Platform::Telegram, "7301", 5).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;

    eventually(
        Duration::from_secs(20),
        "the agent marked OFFLINE",
        || async {
            let s: String = c
                .query_one("SELECT status FROM agents WHERE id = $1", &[&agent])
                .await
                .ok()?
                .get(0);
            (s == "OFFLINE").then_some(())
        },
    )
    .await;
    let m = fleet.metrics().await;
    assert_eq!(
        metric(&m, r#"hermes_agent_presence_expired_total{agent="victor"}"#),
        Some(1.0)
    );
    // Neither round robin nor a mention picks it; the persona answers.
    for text in ["anyone there?", "@victor are you there?"] {
        let run = send_on(&bus, Platform::Telegram, "7301", text).await;
        let chosen = eventually(Duration::from_secs(20), "the run routed", || async {
            routed_to(&env, run).await
        })
        .await;
        assert_eq!(chosen, None, "{text}");
    }
    assert!(fakes.agent.received_requests().await.unwrap().is_empty());

    // A heartbeat on the MCP surface (an ingest of the same install) brings it back: ONLINE,
    // and chosen again by the next message.
    let ingest = env.start(&[Service::Ingest]).await;
    let (_, key) = crate::agent_mcp::key(&env, Some(agent)).await;
    let beat = crate::agent_mcp::Mcp::new(&ingest, &key)
        .ok("agents.heartbeat", json!({}))
        .await;
    assert_eq!(beat["status"], "ONLINE", "{beat}");
    let run = send_on(&bus, Platform::Telegram, "7301", "back now?").await;
    let chosen = eventually(Duration::from_secs(20), "the run routed", || async {
        routed_to(&env, run).await
    })
    .await;
    assert_eq!(
        chosen,
        Some(agent),
        "a heartbeat makes the agent present again"
    );

    drop(c);
    bus.close().await;
    ingest.stop().await.unwrap();
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reply_deadline_is_set_and_shown_with_the_cli() {
    let (_fakes, env) = setup().await;
    let url = "https://agents.example/forge";
    let (code, out, err) = env
        .hermes(&[
            "agents",
            "create",
            "victor",
            "--kind",
            "external",
            "--name",
            "Victor",
            "--webhook-url",
            url,
            "--reply-deadline",
            "2m",
        ])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    let deadline = |env: &TestEnv| {
        let db = env.db();
        async move {
            let c = db.get().await.unwrap();
            agents::by_key(&c, "default", "victor")
                .await
                .unwrap()
                .unwrap()
                .reply_deadline_secs
        }
    };
    assert_eq!(deadline(&env).await, 120);
    let (code, out, err) = env
        .hermes(&["agents", "set", "victor", "--reply-deadline", "90s"])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(deadline(&env).await, 90);
    let (_, shown, _) = env.hermes(&["agents", "show", "victor"]).await;
    assert!(shown.contains("reply deadline 90s (90 s)"), "{shown}");
    let (_, listed, _) = env.hermes(&["agents", "list"]).await;
    assert!(listed.contains("deadline 90s"), "{listed}");

    for (bad, why) in [
        ("0s", "longer than zero"),
        ("10d", "unknown unit"),
        ("8d", "unknown unit"),
        ("200h", "7 days"),
    ] {
        let (code, _, err) = env
            .hermes(&["agents", "set", "victor", "--reply-deadline", bad])
            .await;
        assert_ne!(code, 0, "{bad}");
        assert!(err.contains(why), "{bad}: {err}");
    }
    let (code, _, err) = env
        .hermes(&[
            "agents",
            "create",
            "mizu",
            "--name",
            "Mizu",
            "--reply-deadline",
            "1m",
        ])
        .await;
    assert_ne!(code, 0);
    assert!(err.contains("for external agents"), "{err}");
    assert_eq!(deadline(&env).await, 90, "a refused change changes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_that_cannot_be_delivered_leaves_the_run_to_its_deadline() {
    let (fakes, mut env) = setup().await;
    // The agent's loopback address is no longer allowlisted: its wake is refused and parked.
    env.set("HERMES_WEBHOOK_ALLOW", "10.255.255.0/24");
    victor(&env, &fakes, 1, 2).await;
    env.user(Platform::Telegram, "7401", 5).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;

    let run = send_on(&bus, Platform::Telegram, "7401", "can you hear me?").await;
    // A parked wake used to close its run as failed at once; now the deadline ends it.
    let ended = eventually(Duration::from_secs(30), "the run ended", || async {
        let s = status(&env, run).await;
        matches!(s.as_str(), "failed" | "expired").then_some(s)
    })
    .await;
    assert_eq!(
        ended, "expired",
        "left to the agent's inbox until its deadline"
    );
    let c = env.db().get().await.unwrap();
    let wake: String = c
        .query_one(
            "SELECT status FROM webhook_deliveries WHERE run_id = $1",
            &[&run.as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(wake, "failed", "the wake was refused");
    eventually(Duration::from_secs(20), "the fallback sent", || async {
        (sent_texts(&fakes.telegram).await == vec![EXPIRED_TEXT.to_string()]).then_some(())
    })
    .await;
    assert_eq!(refunds(&env, run).await, 1);
    assert!(fakes.agent.received_requests().await.unwrap().is_empty());

    drop(c);
    bus.close().await;
    fleet.stop().await.unwrap();
}
