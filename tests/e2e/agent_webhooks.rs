//! Signed agent webhooks: a message for an external agent wakes it with the signed
//! envelope (checked by an independent Node.js verifier), a 2xx marks it reachable, a
//! private address is refused, a failing endpoint is retried on the schedule then parked;
//! and `hermes dlq` lists, shows, replays and purges parking queues.

use std::process::Stdio;
use std::time::Duration;

use hermes::Service;
use hermes_bus::{Bus, Stage};
use hermes_db::agents::{self, AgentUpdate};
use hermes_testkit::{TestEnv, eventually, metric};
use hermes_types::agent::EngagementMode;
use hermes_types::envelope::Envelope;
use hermes_types::ids::{AgentId, RunId};
use hermes_types::model::Platform;
use lapin::options::BasicGetOptions;
use lapin::types::AMQPValue;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use uuid::Uuid;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
/// The agent's signing secret (Standard Webhooks form, so both schemes apply).
const AGENT_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// An external agent `victor` at `url` never heard from (ONLINE, no heartbeat yet: an OFFLINE
/// one is not woken, docs/agents.md, "BUSY pauses the dispatcher"), assigned to a REST user
/// `forge-user`.
async fn external_agent(env: &TestEnv, url: &str, standard: bool) -> AgentId {
    let db = env.db();
    let user = env.user(Platform::Rest, "forge-user", 5).await;
    let c = db.get().await.unwrap();
    let victor = env
        .external_agent("victor", url, AGENT_SECRET, 3, EngagementMode::Review)
        .await;
    let change = AgentUpdate {
        standard_webhooks: Some(standard),
        ..AgentUpdate::default()
    };
    assert!(agents::update(&c, victor.id, &change).await.unwrap());
    hermes_db::users::update(&c, user.id, None, None, Some(Some(victor.id)))
        .await
        .unwrap();
    victor.id
}

/// Send a REST message from the assigned user; returns its run id.
async fn message(bus: &Bus, text: &str) -> RunId {
    let run = RunId::new();
    bus.publish(&Envelope::new(
        run,
        None,
        &hermes_testkit::rest_inbound("forge-user", text),
    ))
    .await
    .unwrap();
    run
}

/// The wake row of `run`: (status, attempts, last HTTP status, last error).
async fn wake_row(env: &TestEnv, run: RunId) -> Option<(String, i32, Option<i32>, Option<String>)> {
    let c = env.db().get().await.ok()?;
    let r = c
        .query_opt(
            "SELECT status, attempts, last_status_code, last_error FROM webhook_deliveries WHERE run_id = $1",
            &[&run.as_uuid()],
        )
        .await
        .ok()??;
    Some((r.get(0), r.get(1), r.get(2), r.get(3)))
}

/// Run the Node.js verifier on one received request signed with `secret`.
async fn node_verify(req: &Request, secret: &str) -> Value {
    let headers: serde_json::Map<String, Value> = req
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                json!(v.to_str().unwrap_or_default()),
            )
        })
        .collect();
    let input = json!({
        "body": String::from_utf8(req.body.clone()).unwrap(),
        "headers": headers,
        "secret": secret,
    });
    let mut child = tokio::process::Command::new("node")
        .arg("-e")
        .arg(include_str!("verify_forge_webhook.js"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node is installed (/usr/bin/node)");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "node verifier failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `hermes_webhook_deliveries_total` for `outcome`, if exported.
fn deliveries(text: &str, outcome: &str) -> Option<f64> {
    metric(
        text,
        &format!("hermes_webhook_deliveries_total{{outcome=\"{outcome}\"}}"),
    )
}

/// How many messages `stage`'s parking queue holds.
async fn parked_count(bus: &Bus, stage: Stage) -> u32 {
    bus.queue_stats(&bus.names().parking(stage))
        .await
        .map(|(messages, _)| messages)
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_agent_is_woken_with_a_signed_envelope_and_marked_online() {
    let agent_api = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/agents/forge"))
        .respond_with(ResponseTemplate::new(202))
        .mount(&agent_api)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_WEBHOOK_ALLOW", "127.0.0.1");
    let agent = external_agent(&env, &format!("{}/agents/forge", agent_api.uri()), true).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;
    let run = message(&bus, "please review AXI-42").await;

    let req = eventually(Duration::from_secs(30), "the agent's wake", || async {
        agent_api.received_requests().await?.into_iter().next()
    })
    .await;
    let h = |name: &str| {
        req.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    assert_eq!(h("content-type").as_deref(), Some("application/json"));
    // A person's message on the REST channel is the contract's chat message.
    assert_eq!(h("x-forge-event").as_deref(), Some("CHAT_MESSAGE_POSTED"));
    let delivery = h("x-forge-delivery").expect("X-Forge-Delivery");
    assert_eq!(h("webhook-id"), Some(delivery.clone()));
    assert_eq!(h("webhook-timestamp"), h("x-forge-timestamp"));
    assert!(h("x-forge-signature").unwrap().starts_with("sha256="));
    assert!(h("webhook-signature").unwrap().starts_with("v1,"));

    let body: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(body["kind"], "CHAT_MESSAGE_POSTED");
    assert_eq!(body["deliveryId"], json!(delivery));
    assert_eq!(body["workspace"]["slug"], "default");
    assert_eq!(
        body["agent"],
        json!({ "id": agent, "profileKey": "victor" })
    );
    assert_eq!(body["run"]["id"], json!(run));
    assert_eq!(body["run"]["text"], "please review AXI-42");
    assert_eq!(body["dispatch"]["mode"], "ASSIGNED");
    assert_eq!(body["dispatch"]["chosen"], json!(agent));
    assert_eq!(body["engagement_mode"], "REVIEW");
    assert_eq!(
        body["forge_contract_version"],
        hermes_types::agent::CONTRACT_VERSION
    );
    assert_eq!(body["runtime_policy"]["engagement_mode"], "REVIEW");
    assert_eq!(body["runtime_policy"]["allowed_host_tools"], json!([]));

    let verdict = node_verify(&req, AGENT_SECRET).await;
    assert_eq!(
        verdict,
        json!({ "forge": true, "body": true, "standard": true, "tampered": false, "wrongSecret": false }),
        "the independent verifier's verdict"
    );

    // The 2xx is the heartbeat: the row is delivered and the agent is heard from.
    eventually(Duration::from_secs(15), "the wake recorded", || async {
        let (status, ..) = wake_row(&env, run).await?;
        (status == "delivered").then_some(())
    })
    .await;
    let (_, attempts, code, error) = wake_row(&env, run).await.unwrap();
    assert_eq!((attempts, code, error), (1, Some(202), None));
    let c = env.db().get().await.unwrap();
    let row = c
        .query_one(
            "SELECT status, last_heartbeat_at IS NOT NULL FROM agents WHERE id = $1",
            &[&agent],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "ONLINE");
    assert!(row.get::<_, bool>(1), "last_heartbeat_at bumped");
    assert_eq!(deliveries(&fleet.metrics().await, "delivered"), Some(1.0));
    assert_eq!(agent_api.received_requests().await.unwrap().len(), 1);

    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_agent_url_is_refused_and_parked_without_a_request() {
    let agent_api = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&agent_api)
        .await;
    let mut env = TestEnv::new().await;
    // No HERMES_WEBHOOK_ALLOW: 127.0.0.1 is loopback, so refused.
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS);
    let agent = external_agent(&env, &format!("{}/agents/forge", agent_api.uri()), false).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;
    let run = message(&bus, "wake up").await;

    eventually(Duration::from_secs(30), "the wake refused", || async {
        (parked_count(&bus, Stage::Webhooks).await == 1).then_some(())
    })
    .await;
    let ch = bus.channel().await.unwrap();
    let m = ch
        .basic_get(
            bus.names().parking(Stage::Webhooks).into(),
            BasicGetOptions::default(),
        )
        .await
        .unwrap()
        .expect("the parked wake");
    let headers = m.delivery.properties.headers().clone().unwrap_or_default();
    let reason = headers
        .inner()
        .get(hermes_runtime::stage::FAILURE_REASON_HEADER)
        .and_then(|v| match v {
            AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
            _ => None,
        });
    assert_eq!(reason.as_deref(), Some("address_refused"));
    assert_eq!(
        Envelope::from_slice(&m.delivery.data).unwrap().attempt,
        0,
        "refused at once"
    );

    let (status, attempts, code, error) = wake_row(&env, run).await.unwrap();
    assert_eq!((status.as_str(), attempts, code), ("failed", 0, None));
    let error = error.unwrap();
    assert!(
        error.contains("loopback") && error.contains("HERMES_WEBHOOK_ALLOW"),
        "{error}"
    );
    assert!(
        agent_api.received_requests().await.unwrap().is_empty(),
        "a refused URL is never connected to"
    );
    assert_eq!(deliveries(&fleet.metrics().await, "refused"), Some(1.0));
    let c = env.db().get().await.unwrap();
    let heard: bool = c
        .query_one(
            "SELECT last_heartbeat_at IS NOT NULL FROM agents WHERE id = $1",
            &[&agent],
        )
        .await
        .unwrap()
        .get(0);
    assert!(!heard, "no delivery, no heartbeat");

    drop(ch);
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_agent_endpoint_is_retried_on_the_schedule_then_parked() {
    let agent_api = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&agent_api)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_WEBHOOK_ALLOW", "127.0.0.0/8")
        .set("HERMES_DELIVERY_RETRY_DELAYS", "1,1")
        .set("HERMES_SEND_PAUSES_MS", "10,10,10");
    external_agent(&env, &format!("{}/agents/forge", agent_api.uri()), false).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;
    let run = message(&bus, "wake up").await;

    eventually(Duration::from_secs(40), "the wake parked", || async {
        (parked_count(&bus, Stage::Webhooks).await == 1).then_some(())
    })
    .await;
    // Three attempts (the first and two queued retries), four in-call tries each.
    let (status, attempts, code, error) = wake_row(&env, run).await.unwrap();
    assert_eq!((status.as_str(), attempts, code), ("failed", 12, Some(503)));
    assert!(error.unwrap().contains("service_unavailable"));
    assert_eq!(agent_api.received_requests().await.unwrap().len(), 12);
    let m = fleet.metrics().await;
    assert_eq!(deliveries(&m, "retried"), Some(2.0));
    assert_eq!(deliveries(&m, "parked"), Some(1.0));
    assert_eq!(deliveries(&m, "delivered"), Some(0.0));

    bus.close().await;
    fleet.stop().await.unwrap();
}

/// Run `hermes dlq …` (the real binary) in this test's namespace.
async fn dlq(env: &TestEnv, args: &[&str]) -> std::process::Output {
    hermes(env, &[&["dlq"], args].concat()).await
}

/// Run the real `hermes` binary with this test's environment.
async fn hermes(env: &TestEnv, args: &[&str]) -> std::process::Output {
    env.command().args(args).output().await.unwrap()
}

fn stdout_json(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "hermes dlq failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hermes_dlq_lists_shows_replays_once_and_purges() {
    let agent_api = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&agent_api)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_WEBHOOK_ALLOW", "127.0.0.1")
        .set("HERMES_DELIVERY_RETRY_DELAYS", "1")
        .set("HERMES_SEND_PAUSES_MS", "10");
    external_agent(&env, &format!("{}/agents/forge", agent_api.uri()), false).await;
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;
    // A wake that fails through the schedule, and a Telegram reply with no sender
    // configured (parked at once with its reason).
    let run = message(&bus, "wake up").await;
    let orphan = Envelope::new(
        RunId::new(),
        None,
        &hermes_types::model::Reply {
            reply_to: hermes_types::model::ReplyTo::chat(Platform::Telegram, "42"),
            outcome: hermes_types::model::Outcome::Answered {
                text: "no sender for this".into(),
                model: "mock".into(),
                usage: hermes_types::model::Usage::default(),
                finish_reason: "stop".into(),
                tools_used: Vec::new(),
                transcript: Vec::new(),
            },
            exchange: None,
            detail: None,
            draft_id: None,
            operator: None,
            calls: Vec::new(),
        },
    );
    bus.publish(&orphan).await.unwrap();
    eventually(Duration::from_secs(30), "both parked", || async {
        (parked_count(&bus, Stage::Webhooks).await == 1
            && parked_count(&bus, Stage::Delivery).await == 1)
            .then_some(())
    })
    .await;

    let list = stdout_json(&dlq(&env, &["list", "--json"]).await);
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), 2, "{list}");
    let wake = rows.iter().find(|r| r["kind"] == "agent_wake").unwrap();
    assert_eq!(wake["reason"], "service_unavailable");
    assert_eq!(wake["run_id"], json!(run));
    assert_eq!(wake["attempt"], 1);
    let reply = rows.iter().find(|r| r["kind"] == "reply").unwrap();
    assert_eq!(reply["id"], json!(orphan.id));
    assert_eq!(reply["reason"], "no_sender", "{reply}");
    // Looking does not count as a failed delivery: listed again and again, a parked message
    // keeps its headers and a zero count (a delivery limit on parking queues would
    // otherwise drop it after so many looks).
    for _ in 0..3 {
        stdout_json(&dlq(&env, &["list", "--json"]).await);
    }
    let again = stdout_json(&dlq(&env, &["list", "--json"]).await);
    let again = again.as_array().unwrap();
    assert_eq!(again.len(), 2, "{again:?}");
    for row in again {
        assert_eq!(row["returned"], 0, "{row}");
    }
    let reply_again = again.iter().find(|r| r["kind"] == "reply").unwrap();
    assert_eq!(reply_again["reason"], "no_sender");
    let text = dlq(&env, &["list", "--queue", "webhooks"]).await;
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("agent_wake") && !text.contains(" reply "),
        "{text}"
    );

    let wake_id = wake["id"].as_str().unwrap();
    let shown = stdout_json(&dlq(&env, &["show", wake_id, "--json"]).await);
    assert_eq!(shown["envelope"]["id"], json!(wake_id));
    assert_eq!(shown["envelope"]["kind"], "agent_wake");
    assert!(shown["detail"].as_str().unwrap().contains("503"), "{shown}");
    let missing = dlq(&env, &["show", "01a00000-0000-7000-8000-000000000000"]).await;
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).starts_with("hermes dlq: no parked message"));

    // Purge asks for --yes and keeps everything without it.
    let refused = dlq(&env, &["purge", "--queue", "delivery"]).await;
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--yes"));
    assert_eq!(parked_count(&bus, Stage::Delivery).await, 1);
    assert_eq!(
        parked_count(&bus, Stage::Webhooks).await,
        1,
        "listing returns what it read"
    );

    // The agent is back: replay the wake (same id) and it is delivered exactly once.
    agent_api.reset().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&agent_api)
        .await;
    let replayed = stdout_json(
        &dlq(
            &env,
            &["replay", "--reason", "service_unavailable", "--json"],
        )
        .await,
    );
    assert_eq!(replayed, json!({ "replayed": 1 }));
    eventually(
        Duration::from_secs(30),
        "the replayed wake delivered",
        || async {
            let (status, ..) = wake_row(&env, run).await?;
            (status == "delivered").then_some(())
        },
    )
    .await;
    // Once the replayed wake is acked it cannot be delivered again.
    let acked = format!(
        "hermes_bus_messages_total{{outcome=\"acked\",queue=\"{}.webhooks\"}}",
        env.ns
    );
    eventually(
        Duration::from_secs(15),
        "the replayed wake acked",
        || async { (metric(&fleet.metrics().await, &acked)? >= 1.0).then_some(()) },
    )
    .await;
    let got = agent_api.received_requests().await.unwrap();
    assert_eq!(got.len(), 1, "delivered exactly once");
    assert_eq!(
        got[0]
            .headers
            .get("x-forge-delivery")
            .unwrap()
            .to_str()
            .unwrap(),
        wake_row_delivery(&env, run).await
    );
    assert_eq!(parked_count(&bus, Stage::Webhooks).await, 0);
    assert_eq!(
        parked_count(&bus, Stage::Delivery).await,
        1,
        "not matched, untouched"
    );

    let purged =
        stdout_json(&dlq(&env, &["purge", "--queue", "delivery", "--yes", "--json"]).await);
    assert_eq!(purged, json!({ "purged": 1 }));
    assert_eq!(parked_count(&bus, Stage::Delivery).await, 0);

    bus.close().await;
    fleet.stop().await.unwrap();
}

/// The `webhook_deliveries` id of `run`'s wake.
async fn wake_row_delivery(env: &TestEnv, run: RunId) -> String {
    let c = env.db().get().await.unwrap();
    let id: Uuid = c
        .query_one(
            "SELECT id FROM webhook_deliveries WHERE run_id = $1",
            &[&run.as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    id.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_created_with_the_cli_gets_standard_webhooks_its_secret_verifies() {
    let agent_api = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&agent_api)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_WEBHOOK_ALLOW", "127.0.0.1");
    let url = format!("{}/hook", agent_api.uri());
    let created = stdout_json(
        &hermes(
            &env,
            &[
                "agents",
                "create",
                "mizu",
                "--kind",
                "external",
                "--name",
                "Mizu",
                "--webhook-url",
                &url,
                "--standard-webhooks",
                "--json",
            ],
        )
        .await,
    );
    assert_eq!(created["agent"]["standard_webhooks"], true);
    let secret = created["webhook_secret"].as_str().unwrap().to_string();
    let refused = hermes(
        &env,
        &[
            "agents",
            "create",
            "ben",
            "--name",
            "Ben",
            "--standard-webhooks",
        ],
    )
    .await;
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("external agents"));

    let user = env.user(Platform::Rest, "forge-user", 5).await;
    let c = env.db().get().await.unwrap();
    let agent: AgentId = created["agent"]["id"].as_str().unwrap().parse().unwrap();
    hermes_db::users::update(&c, user.id, None, None, Some(Some(agent)))
        .await
        .unwrap();
    let fleet = env.start(&[Service::Router, Service::Delivery]).await;
    let bus = env.bus().await;
    message(&bus, "hello mizu").await;
    let req = eventually(Duration::from_secs(30), "the wake", || async {
        agent_api.received_requests().await?.into_iter().next()
    })
    .await;
    let verdict = node_verify(&req, &secret).await;
    assert_eq!(verdict["forge"], true, "{verdict}");
    assert_eq!(verdict["body"], true, "{verdict}");
    assert_eq!(verdict["standard"], true, "{verdict}");

    // Switched off, the next wake carries only the X-Forge headers.
    let off = hermes(
        &env,
        &["agents", "set", "mizu", "--standard-webhooks", "false"],
    )
    .await;
    assert!(
        off.status.success(),
        "{}",
        String::from_utf8_lossy(&off.stderr)
    );
    message(&bus, "again").await;
    let second = eventually(Duration::from_secs(30), "the second wake", || async {
        agent_api.received_requests().await?.into_iter().nth(1)
    })
    .await;
    assert!(second.headers.get("x-forge-signature").is_some());
    assert!(second.headers.get("webhook-signature").is_none());

    bus.close().await;
    fleet.stop().await.unwrap();
}
