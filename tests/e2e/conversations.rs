//! What a conversation's model context may hold (docs/security.md, "Conversations and
//! tools"): one person's own turns of one session, never another group member's, never an
//! earlier session's; and round robin that keeps every message with an agent under load.

use std::time::Duration;

use hermes::Service;
use hermes_cache::Cache;
use hermes_db::Db;
use hermes_telemetry::Metrics;
use hermes_testkit::{TestEnv, eventually, queued_llm_requests, rest_inbound};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::ids::SessionId;
use hermes_types::model::{Exchange, FinishReason, Inbound, Outcome, Platform, Reply, Tier};
use secrecy::SecretString;
use serde_json::{Value, json};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SESSION_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// A message from `sender` in the chat `chat` of `platform`, as ingest would publish it.
fn message(platform: Platform, sender: &str, chat: &str, text: &str) -> Inbound {
    let mut inbound = rest_inbound(sender, text);
    inbound.event.platform = platform;
    inbound.event.chat_id = chat.into();
    inbound
}

/// The user and assistant turns of every model request the router made, oldest first.
async fn model_turns(db: &Db) -> Vec<Vec<String>> {
    queued_llm_requests(db)
        .await
        .into_iter()
        .map(|e| {
            e["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] != "system")
                .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .collect()
}

/// Wait until `n` runs are completed.
pub(crate) async fn completed(db: &Db, n: i64) {
    eventually(Duration::from_secs(30), "runs completed", || async {
        let c = db.get().await.ok()?;
        let got: i64 = c
            .query_one(
                "SELECT count(*) FROM agent_runs WHERE status = 'completed'",
                &[],
            )
            .await
            .ok()?
            .get(0);
        (got >= n).then_some(())
    })
    .await;
}

/// Send `inbound` and wait until `n` runs are completed.
async fn exchange(env: &TestEnv, bus: &hermes_bus::Bus, inbound: &Inbound, n: i64) {
    bus.publish(&Envelope::new(RunId::new(), None, inbound))
        .await
        .unwrap();
    completed(&env.db(), n).await;
}

/// A Telegram Bot API that accepts every send.
pub(crate) async fn telegram_api() -> MockServer {
    let api = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex("^/bot.*/send"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"ok": true, "result": {"message_id": 1}})),
        )
        .mount(&api)
        .await;
    api
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_group_chat_each_member_sees_only_their_own_turns() {
    let telegram = telegram_api().await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_SESSION_KEYS", SESSION_KEYS)
        .set("TELEGRAM_BOT_TOKEN", "123:abc")
        .set("TELEGRAM_API_BASE_URL", &telegram.uri());
    env.user(Platform::Telegram, "1001", 10).await;
    env.user(Platform::Telegram, "1002", 10).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    let group = "-100777";
    let say = |sender: &str, text: &str| message(Platform::Telegram, sender, group, text);

    exchange(&env, &bus, &say("1001", "my salary is 9000 a month"), 1).await;
    exchange(&env, &bus, &say("1001", "and my rent is 2000"), 2).await;
    exchange(&env, &bus, &say("1002", "hello"), 3).await;
    exchange(&env, &bus, &say("1002", "what did the others say"), 4).await;

    let turns = model_turns(&env.db()).await;
    assert_eq!(
        turns[3],
        ["hello", "echo: hello", "what did the others say"],
        "another member's turns never reach this member's model"
    );
    // Each member keeps their own conversation in the group.
    assert_eq!(
        turns[1],
        [
            "my salary is 9000 a month",
            "echo: my salary is 9000 a month",
            "and my rent is 2000"
        ]
    );
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_never_sees_the_old_sessions_turns_nor_its_late_reply() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_SESSION_KEYS", SESSION_KEYS);
    env.user(Platform::Rest, "sleeper", 10).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;
    let db = env.db();
    let say = |text: &str| message(Platform::Rest, "sleeper", "sleeper", text);
    exchange(&env, &bus, &say("my name is Ana"), 1).await;
    let old_session: uuid::Uuid = db
        .get()
        .await
        .unwrap()
        .query_one("SELECT id FROM sessions", &[])
        .await
        .unwrap()
        .get(0);

    // Twelve hours and a second of silence: the next message starts a new session.
    let c = db.get().await.unwrap();
    c.execute(
        "UPDATE sessions SET last_activity_at = now() - interval '12 hours 1 second'",
        &[],
    )
    .await
    .unwrap();
    exchange(&env, &bus, &say("hello again"), 2).await;

    // A reply of the old session arrives late (a slow model, a retried delivery): its run
    // was opened in the old session and is still open.
    let late_run = RunId::new();
    c.execute(
        "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier)
         VALUES ($1, 'rest', 'sleeper', 'sleeper', 'routed', 'free')",
        &[&late_run.as_uuid()],
    )
    .await
    .unwrap();
    let late = Reply {
        reply_to: say("x").reply_to(),
        exchange: Some(Exchange {
            user_id: env_user(&db, "sleeper").await,
            session_id: SessionId::from(old_session),
            tier: Tier::Free,
            user_text: "my password is hunter2".into(),
            provenance: Default::default(),
        }),
        outcome: Outcome::Answered {
            text: "noted: hunter2".into(),
            model: "m".into(),
            usage: Default::default(),
            finish_reason: FinishReason::Stop,
            tools_used: Vec::new(),
            transcript: Vec::new(),
        },
        detail: None,
        draft_id: None,
        operator: None,
        calls: Vec::new(),
    };
    bus.publish(&Envelope::new(late_run, None, &late))
        .await
        .unwrap();
    // Delivery appends the run's final event after everything else it does for a reply.
    let cache = Cache::new(
        &SecretString::from(env.vars["REDIS_URL"].clone()),
        env.config().namespace.clone(),
        Metrics::new(),
    )
    .unwrap();
    let events = cache.key(format_args!("run:{late_run}:events"));
    eventually(
        Duration::from_secs(30),
        "the late reply delivered",
        || async {
            let mut conn = cache.conn();
            let n: i64 = redis::cmd("EXISTS")
                .arg(&events)
                .query_async(&mut conn)
                .await
                .ok()?;
            (n == 1).then_some(())
        },
    )
    .await;
    exchange(&env, &bus, &say("what is my name"), 4).await;

    let turns = model_turns(&db).await;
    assert_eq!(
        turns[2],
        ["hello again", "echo: hello again", "what is my name"],
        "only the new session's own turns"
    );
    let sessions: i64 = c
        .query_one("SELECT count(*) FROM sessions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sessions, 2, "the late reply did not revive the old session");
    bus.close().await;
    fleet.stop().await.unwrap();
}

/// The id of the user linked to `sender`.
async fn env_user(db: &Db, sender: &str) -> hermes_types::ids::UserId {
    let c = db.get().await.unwrap();
    let id: uuid::Uuid = c
        .query_one(
            "SELECT user_id FROM user_channels WHERE sender_id = $1",
            &[&sender],
        )
        .await
        .unwrap()
        .get(0);
    hermes_types::ids::UserId::from(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_messages_at_once_all_reach_agents_in_turn_within_capacity() {
    let env = TestEnv::new().await;
    let db = env.db();
    let mut keys = std::collections::BTreeMap::new();
    for key in ["ana", "ben", "cy"] {
        keys.insert(crate::router::internal_agent(&db, key, 17).await, key);
    }
    for i in 0..50 {
        env.user(Platform::Rest, &format!("crowd{i}"), 5).await;
    }
    // All fifty wait in the queue before the router starts, so they arrive at once.
    let bus = env.bus().await;
    for i in 0..50 {
        hermes_testkit::send(&bus, &format!("crowd{i}"), "plan my weekend").await;
    }
    let fleet = env.start(&[Service::Router]).await;
    eventually(Duration::from_secs(60), "fifty runs dispatched", || async {
        let c = db.get().await.ok()?;
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM agent_runs WHERE dispatch IS NOT NULL",
                &[],
            )
            .await
            .ok()?
            .get(0);
        (n == 50).then_some(())
    })
    .await;
    let c = db.get().await.unwrap();
    let defaults: Vec<Value> = c
        .query(
            "SELECT dispatch FROM agent_runs WHERE agent_id IS NULL",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(defaults.is_empty(), "sent to the persona: {defaults:?}");
    let mut per_agent: Vec<i64> = c
        .query(
            "SELECT count(*) FROM agent_runs GROUP BY agent_id ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    per_agent.sort();
    assert_eq!(per_agent, [16, 17, 17], "in turn, within capacity");
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_phone_number_appears_in_a_redis_key_name() {
    use hmac::{Hmac, Mac};
    const APP_SECRET: &str = "wa-app-secret-0123";
    const PHONE: &str = "15551234567";
    let graph = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex("/messages$"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"messages": [{"id": "wamid.out"}]})),
        )
        .mount(&graph)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_SESSION_KEYS", SESSION_KEYS)
        .set("WHATSAPP_APP_SECRET", APP_SECRET)
        .set("WHATSAPP_VERIFY_TOKEN", "wa-verify")
        .set("WHATSAPP_ACCESS_TOKEN", "wa-token")
        .set("WHATSAPP_PHONE_NUMBER_ID", "PHONE_ID")
        .set("WHATSAPP_API_BASE_URL", &graph.uri());
    env.user(Platform::Whatsapp, PHONE, 10).await;
    let fleet = env.start(&Service::ALL).await;
    let http = reqwest::Client::new();
    for (i, text) in ["hola", "¿abren el domingo?"].into_iter().enumerate() {
        // Real message ids embed the sender's number too. Sent now: inside the 24-hour
        // window, the reply goes as free text.
        let now = chrono::Utc::now().timestamp().to_string();
        let body = serde_json::to_vec(&json!({
            "object": "whatsapp_business_account",
            "entry": [{"id": "WABA_ID", "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550001111", "phone_number_id": "PHONE_ID"},
                "contacts": [{"profile": {"name": "Kai"}, "wa_id": PHONE}],
                "messages": [{"from": PHONE, "id": format!("wamid.{PHONE}.{i}"),
                              "timestamp": now, "type": "text", "text": {"body": text}}]
            }}]}]
        }))
        .unwrap();
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(APP_SECRET.as_bytes()).unwrap();
        mac.update(&body);
        let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        let resp = http
            .post(fleet.url("/webhooks/whatsapp"))
            .header("content-type", "application/json")
            .header("x-hub-signature-256", signature)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        completed(&env.db(), i as i64 + 1).await;
    }
    let cache = Cache::new(
        &SecretString::from(env.vars["REDIS_URL"].clone()),
        env.config().namespace.clone(),
        Metrics::new(),
    )
    .unwrap();
    let mut conn = cache.conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(cache.key("*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    // The exchange left keys behind: history, rate limits, dedupe, outbound rate gates.
    assert!(keys.len() >= 4, "{keys:?}");
    let named: Vec<&String> = keys.iter().filter(|k| k.contains(PHONE)).collect();
    assert!(named.is_empty(), "keys naming the number: {named:?}");
    fleet.stop().await.unwrap();
}
