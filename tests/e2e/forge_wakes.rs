//! A Forge's wakes at `POST /agents/forge` (docs/agents.md, "Hermes as a Forge agent"): a
//! wake signed with any configured secret is queued for the router once, a replayed
//! delivery id queues nothing, and every bad wake (unsigned, wrongly signed, stale,
//! malformed, oversized, for an unknown or external agent) is refused with its own clear
//! error and leaves nothing behind: no message on the router's queue, no delivery id, no run.

use hermes::Service;
use hermes_bus::Stage;
use hermes_db::agents::{self, NewAgent};
use hermes_net::signing::{
    FORGE_BODY_SIGNATURE, FORGE_DELIVERY, FORGE_SIGNATURE, FORGE_TIMESTAMP, WakeSigning,
    wake_headers,
};
use hermes_testkit::fakes::drain;
use hermes_testkit::{Fleet, TestEnv, count, metric};
use hermes_types::agent::{AgentKind, EngagementMode, Tone};
use hermes_types::ids::AgentId;
use hermes_types::model::{Inbound, Platform};
use serde_json::{Value, json};

/// The secret the tests' Forge signs with now, and the one it used before (both listed).
pub const SECRET: &str = "forge-secret-current-0123456789abcdef";
const OLD_SECRET: &str = "forge-secret-previous-0123456789abcdef";
const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// `env` set up to take Forge wakes signed with [`SECRET`] (or the previous secret).
pub fn forge_env(env: &mut TestEnv) -> &mut TestEnv {
    env.set(
        "HERMES_FORGE_WEBHOOK_SECRETS",
        &format!("{OLD_SECRET}, {SECRET}"),
    )
}

/// An agent `key` of `kind` in the workspace `workspace`.
pub async fn agent(env: &TestEnv, workspace: &str, key: &str, kind: AgentKind) -> AgentId {
    let c = env.db().get().await.unwrap();
    let sealed = (kind == AgentKind::External).then(|| {
        hermes_net::keyring::KeyRing::new(&env.config().router.secret_keys)
            .unwrap()
            .seal(b"whsec_agent")
    });
    agents::create(
        &c,
        &NewAgent {
            workspace,
            profile_key: key,
            kind,
            display_name: "Victor",
            tone: Tone::Professional,
            role: None,
            role_instructions: None,
            tier: None,
            toolsets: &[],
            capabilities: &[],
            webhook_url: (kind == AgentKind::External).then_some("https://agents.example/hook"),
            webhook_secret_sealed: sealed.as_deref(),
            max_concurrent: 3,
            engagement_mode: EngagementMode::Execute,
        },
    )
    .await
    .unwrap()
    .id
}

/// The headers of `body` signed with `secret` at `timestamp` as delivery `delivery`.
pub fn signed(secret: &str, timestamp: i64, delivery: &str, body: &[u8]) -> Vec<(String, String)> {
    let signing = WakeSigning {
        event: "AGENT_ASSIGNED",
        delivery_id: delivery,
        timestamp,
        standard: false,
    };
    wake_headers(secret.as_bytes(), &signing, body)
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// POST `envelope` signed with [`SECRET`] now, as delivery `delivery`.
pub async fn wake(fleet: &Fleet, envelope: &Value, delivery: &str) -> reqwest::Response {
    let body = envelope.to_string();
    let headers = signed(SECRET, now(), delivery, body.as_bytes());
    fleet.forge_wake(body.as_bytes(), &headers).await
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The seed's wake envelope for `profile_key`, with the REVIEW dispatch fields.
fn envelope(profile_key: &str) -> Value {
    json!({
        "kind": "AGENT_ASSIGNED",
        "workspace": {"id": "wks_axi", "slug": "axiom", "key": "AXI"},
        "agent": {"id": "agt_victor", "profileKey": profile_key},
        "issue": {"id": "iss_01HX", "key": "AXI-42", "title": "Fix the login page"},
        "dispatch": {"mode": "ROUND_ROBIN", "chosen": "agt_victor", "reason": "round-robin"},
        "engagement_mode": "REVIEW",
        "forge_contract_version": "2026-06-06.2",
        "tool_allowlist": [],
        "runtime_policy": {"contract_version": "2026-06-06.2", "engagement_mode": "REVIEW",
            "allowed_host_tools": [],
            "enforcement_layers": [{"kind": "forge-mcp", "enforced": true},
                                   {"kind": "hermes-host", "enforced": true}]}
    })
}

/// The refusal's status and error code.
async fn refused(resp: reqwest::Response) -> (u16, String) {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let code = body["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        !body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .is_empty(),
        "a refusal says why: {body}"
    );
    (status, code)
}

/// Nothing was queued: no message for the router, no delivery id taken, no run.
async fn nothing_queued(env: &TestEnv) {
    let bus = env.bus().await;
    assert!(
        drain(&bus, Stage::Router).await.is_empty(),
        "a message was queued"
    );
    let db = env.db();
    assert_eq!(
        count(&db, "SELECT count(*) FROM forge_deliveries", &[]).await,
        0
    );
    assert_eq!(count(&db, "SELECT count(*) FROM agent_runs", &[]).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_wakes_are_refused_clearly_and_queue_nothing_and_a_replay_is_taken_once() {
    let mut env = TestEnv::new().await;
    forge_env(&mut env)
        .set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("HERMES_FORGE_MAX_BODY_BYTES", "4096");
    let victor = agent(&env, "default", "victor", AgentKind::Internal).await;
    agent(&env, "default", "outside", AgentKind::External).await;
    let fleet = env.start(&[Service::Ingest]).await;
    let body = envelope("victor").to_string();
    let b = body.as_bytes();

    // Signed with a secret the route does not hold.
    let h = signed("not-our-secret", now(), "dlv_1", b);
    assert_eq!(
        refused(fleet.forge_wake(b, &h).await).await,
        (401, "invalid_signature".into())
    );
    // Correctly signed, six minutes ago.
    let h = signed(SECRET, now() - 360, "dlv_1", b);
    assert_eq!(
        refused(fleet.forge_wake(b, &h).await).await,
        (401, "stale_timestamp".into())
    );
    // No signature at all; a timestamp that is not one.
    let h = vec![(FORGE_DELIVERY.to_string(), "dlv_1".to_string())];
    assert_eq!(
        refused(fleet.forge_wake(b, &h).await).await,
        (401, "missing_signature".into())
    );
    let mut h = signed(SECRET, now(), "dlv_1", b);
    h.retain(|(k, _)| k != FORGE_TIMESTAMP);
    h.push((FORGE_TIMESTAMP.into(), "yesterday".into()));
    assert_eq!(
        refused(fleet.forge_wake(b, &h).await).await,
        (401, "invalid_timestamp".into())
    );
    // The body is covered: the same headers on another body do not verify.
    let h = signed(SECRET, now(), "dlv_1", b);
    let other = envelope("outside").to_string();
    assert_eq!(
        refused(fleet.forge_wake(other.as_bytes(), &h).await).await,
        (401, "invalid_signature".into())
    );
    // Signed, but without the delivery id that deduplicates it.
    let mut h = signed(SECRET, now(), "dlv_1", b);
    h.retain(|(k, _)| k != FORGE_DELIVERY);
    assert_eq!(
        refused(fleet.forge_wake(b, &h).await).await,
        (400, "missing_delivery_id".into())
    );
    // Signed garbage, a wake for nobody, for an unknown agent, for an external one.
    let garbage = b"{\"agent\": {\"profileKey\": ";
    let h = signed(SECRET, now(), "dlv_2", garbage);
    assert_eq!(
        refused(fleet.forge_wake(garbage, &h).await).await,
        (400, "malformed_payload".into())
    );
    let nobody = json!({"kind": "AGENT_ASSIGNED", "agent": {"id": "agt_1"}});
    assert_eq!(
        refused(wake(&fleet, &nobody, "dlv_3").await).await,
        (400, "missing_profile_key".into())
    );
    assert_eq!(
        refused(wake(&fleet, &envelope("mizu"), "dlv_4").await).await,
        (404, "unknown_agent".into())
    );
    assert_eq!(
        refused(wake(&fleet, &envelope("outside"), "dlv_5").await).await,
        (409, "external_agent".into())
    );
    // Beyond HERMES_FORGE_MAX_BODY_BYTES.
    let mut big = envelope("victor");
    big["issue"]["title"] = Value::String("x".repeat(5000));
    let big = big.to_string();
    let h = signed(SECRET, now(), "dlv_6", big.as_bytes());
    assert_eq!(
        refused(fleet.forge_wake(big.as_bytes(), &h).await).await.0,
        413
    );
    nothing_queued(&env).await;

    // A good wake, signed with the previous secret (rotation): queued once.
    let h = signed(OLD_SECRET, now(), "dlv_good", b);
    let resp = fleet.forge_wake(b, &h).await;
    assert_eq!(resp.status(), 202);
    let taken: Value = resp.json().await.unwrap();
    assert_eq!(taken["delivery_id"], "dlv_good");
    let run = taken["run_id"].as_str().unwrap().to_string();
    // The Forge retries the same delivery (fresh timestamp, fresh signature): nothing new.
    let resp = wake(&fleet, &envelope("victor"), "dlv_good").await;
    assert_eq!(resp.status(), 200);
    let replay: Value = resp.json().await.unwrap();
    assert_eq!(replay["duplicate"], true);
    assert_eq!(replay["run_id"], run.as_str());
    // A captured wake replayed under a fresh X-Forge-Delivery (which no signature covers),
    // as captured or with its signature re-spelled: refused for what the signature covers.
    let mut captured_wake = envelope("victor");
    captured_wake["issue"]["key"] = "AXI-43".into();
    let captured_body = captured_wake.to_string();
    let cb = captured_body.as_bytes();
    let captured = signed(OLD_SECRET, now(), "dlv_captured", cb);
    assert_eq!(fleet.forge_wake(cb, &captured).await.status(), 202);
    let under = |delivery: &str, upper: bool| -> Vec<(String, String)> {
        captured
            .iter()
            .map(|(k, v)| match k.as_str() {
                FORGE_DELIVERY => (k.clone(), delivery.to_string()),
                FORGE_SIGNATURE if upper => {
                    let hex = v.trim_start_matches("sha256=").to_uppercase();
                    (k.clone(), format!(" sha256={hex} "))
                }
                _ => (k.clone(), v.clone()),
            })
            .collect()
    };
    for (delivery, upper) in [("dlv_fresh_1", false), ("dlv_fresh_2", true)] {
        let resp = fleet.forge_wake(cb, &under(delivery, upper)).await;
        assert_eq!(refused(resp).await, (409, "replayed".into()), "{delivery}");
    }

    let bus = env.bus().await;
    let queued = drain(&bus, Stage::Router).await;
    assert_eq!(queued.len(), 2, "the retry and the replays queued nothing");
    assert_eq!(queued[0].run_id.to_string(), run);
    let inbound: Inbound = queued[0].payload().unwrap();
    assert_eq!(inbound.event.platform, Platform::Forge);
    assert_eq!(
        inbound.event.external_message_id.as_deref(),
        Some("dlv_good")
    );
    let forge = inbound.forge.expect("the wake's routing travels with it");
    assert_eq!(forge.agent_id, victor);
    assert_eq!(forge.event, "AGENT_ASSIGNED");
    assert_eq!(forge.contract_version.as_deref(), Some("2026-06-06.2"));
    assert_eq!(inbound.policy.engagement_mode, EngagementMode::Review);
    assert_eq!(inbound.policy.tool_allowlist, Some(Vec::new()));
    assert_eq!(inbound.event.metadata.unwrap()["issue"]["key"], "AXI-42");
    let db = env.db();
    assert_eq!(
        count(&db, "SELECT count(*) FROM forge_deliveries", &[]).await,
        2
    );

    let metrics = fleet.metrics().await;
    for (outcome, n) in [
        ("queued", 2.0),
        ("duplicate", 1.0),
        ("invalid_signature", 2.0),
        ("stale_timestamp", 1.0),
        ("missing_signature", 1.0),
        ("unknown_agent", 1.0),
        ("external_agent", 1.0),
        ("body_too_large", 1.0),
        ("replayed", 2.0),
    ] {
        let series = format!("hermes_forge_wakes_total{{outcome=\"{outcome}\"}}");
        assert_eq!(metric(&metrics, &series), Some(n), "{series}\n{metrics}");
    }
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_body_only_signature_is_verified_where_configured_and_the_route_is_off_without_a_secret()
 {
    let mut env = TestEnv::new().await;
    forge_env(&mut env).set("HERMES_FORGE_BODY_SIGNATURE", "true");
    agent(&env, "default", "victor", AgentKind::Internal).await;
    let fleet = env.start(&[Service::Ingest]).await;
    let body = envelope("victor").to_string();
    let b = body.as_bytes();

    // A proxy dropped the timestamp and the timestamped signature: the body signature holds.
    let only_body = |secret: &str, delivery: &str| {
        let mut h = signed(secret, now(), delivery, b);
        h.retain(|(k, _)| k == FORGE_BODY_SIGNATURE || k == FORGE_DELIVERY);
        h
    };
    let wrong = only_body("not-our-secret", "dlv_b1");
    assert_eq!(
        refused(fleet.forge_wake(b, &wrong).await).await,
        (401, "invalid_signature".into())
    );
    let mut timestamped_only = signed(SECRET, now(), "dlv_b1", b);
    timestamped_only.retain(|(k, _)| k != FORGE_BODY_SIGNATURE);
    assert_eq!(
        refused(fleet.forge_wake(b, &timestamped_only).await).await,
        (401, "missing_signature".into())
    );
    nothing_queued(&env).await;
    let resp = fleet.forge_wake(b, &only_body(SECRET, "dlv_b1")).await;
    assert_eq!(resp.status(), 202);
    // The Forge's retry of the delivery is a duplicate; the same body under a fresh
    // delivery id (which no signature covers) is a replay, refused by the body itself.
    let resp = fleet.forge_wake(b, &only_body(SECRET, "dlv_b1")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        refused(fleet.forge_wake(b, &only_body(SECRET, "dlv_b2")).await).await,
        (409, "replayed".into())
    );
    let bus = env.bus().await;
    assert_eq!(drain(&bus, Stage::Router).await.len(), 1);
    fleet.stop().await.unwrap();

    // Without a secret the route is not even mounted: nothing can be woken.
    let env = TestEnv::new().await;
    agent(&env, "default", "victor", AgentKind::Internal).await;
    let fleet = env.start(&[Service::Ingest]).await;
    let h = signed(SECRET, now(), "dlv_off", b);
    assert_eq!(
        refused(fleet.forge_wake(b, &h).await).await,
        (404, "not_found".into())
    );
    nothing_queued(&env).await;
    fleet.stop().await.unwrap();
}

/// A wake the broker does not confirm is answered 503 and its delivery id released, so the
/// Forge's retry of the same delivery is taken rather than answered as a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_the_broker_does_not_confirm_is_503_and_its_retry_is_taken() {
    let mut env = TestEnv::new().await;
    let proxy = env.broker_behind_proxy().await;
    forge_env(&mut env).set("HERMES_PUBLISH_TIMEOUT_SECS", "1");
    agent(&env, "default", "victor", AgentKind::Internal).await;
    let fleet = env.start(&[Service::Ingest]).await;
    let db = env.db();

    proxy.set_stalled(true);
    let resp = wake(&fleet, &envelope("victor"), "dlv_stalled").await;
    assert_eq!(refused(resp).await, (503, "unavailable".into()));
    assert_eq!(
        count(&db, "SELECT count(*) FROM forge_deliveries", &[]).await,
        0,
        "the claim was released"
    );
    proxy.set_stalled(false);

    let resp = wake(&fleet, &envelope("victor"), "dlv_stalled").await;
    assert_eq!(resp.status(), 202, "the retry is taken, not a duplicate");
    assert_eq!(
        count(&db, "SELECT count(*) FROM forge_deliveries", &[]).await,
        1
    );
    let metrics = fleet.metrics().await;
    assert_eq!(
        metric(
            &metrics,
            "hermes_forge_wakes_total{outcome=\"unavailable\"}"
        ),
        Some(1.0)
    );
    fleet.stop().await.unwrap();
}

/// `hermes agents create|set KEY --max-tool-rounds N` sets an internal agent's bound (1 to
/// 32); an external agent runs its own tools and takes none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_sets_an_internal_agents_tool_rounds() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_SECRET_KEYS", SECRET_KEYS);
    let hermes = |args: &'static [&'static str]| {
        let mut command = env.command();
        command.args(args);
        async move { command.output().await.unwrap() }
    };
    let show = |out: std::process::Output| -> Value {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let created = show(
        hermes(&[
            "agents",
            "create",
            "victor",
            "--name",
            "Victor",
            "--max-tool-rounds",
            "6",
            "--json",
        ])
        .await,
    );
    assert_eq!(created["agent"]["max_tool_rounds"], 6);
    let plain = show(hermes(&["agents", "create", "mizu", "--name", "Mizu", "--json"]).await);
    assert_eq!(plain["agent"]["max_tool_rounds"], 4, "the default");
    let set = hermes(&["agents", "set", "victor", "--max-tool-rounds", "2"]).await;
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let shown = show(hermes(&["agents", "show", "victor", "--json"]).await);
    assert_eq!(shown["max_tool_rounds"], 2);
    for args in [
        &["agents", "set", "victor", "--max-tool-rounds", "0"][..],
        &["agents", "set", "victor", "--max-tool-rounds", "33"][..],
        &[
            "agents",
            "create",
            "ext",
            "--kind",
            "external",
            "--name",
            "Ext",
            "--webhook-url",
            "https://agents.example/hook",
            "--max-tool-rounds",
            "3",
        ][..],
    ] {
        let out = hermes(args).await;
        assert!(!out.status.success(), "{args:?} was taken");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("max-tool-rounds"),
            "{args:?}"
        );
    }
    let shown = show(hermes(&["agents", "show", "victor", "--json"]).await);
    assert_eq!(
        shown["max_tool_rounds"], 2,
        "a refused change changes nothing"
    );
}
