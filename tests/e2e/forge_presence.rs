//! Presence towards the Forge (docs/agents.md, "Presence towards the Forge", contract item
//! 11), against the fake Forge written from the contract's text: `agents.me` once, then
//! `agents.heartbeat` on the interval (ONLINE, BUSY while the agent's Forge runs fill its
//! `maxConcurrent`, OFFLINE on a graceful stop), sent by one replica at a time; a change of
//! status is sent at once, not at the next interval.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use hermes::Service;
use hermes_testkit::{TestEnv, count, eventually, metric};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::fake_forge::{Call, FakeForge};
use crate::forge_agent::{
    closed, contract_wake, forge_agent_env, forge_config, forge_tools_published,
};
use crate::forge_wakes::wake;

/// The statuses of the heartbeats among `calls`, in order.
fn statuses(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.tool == "agents.heartbeat")
        .map(|c| c.arguments["status"].as_str().unwrap_or("-").to_string())
        .collect()
}

/// Wait until the Forge has seen at least `n` presence calls.
async fn presence_calls(forge: &FakeForge, n: usize, what: &str) -> Vec<Call> {
    eventually(Duration::from_secs(30), what, || async {
        let calls = forge.presence();
        (calls.len() >= n).then_some(calls)
    })
    .await
}

/// A model that answers "done" after `delay` (a run stays open that long).
async fn slow_model(delay: Duration) -> MockServer {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(hermes_testkit::openai_answer("done", 10, 2))
                .set_delay(delay),
        )
        .mount(&provider)
        .await;
    provider
}

/// A gate the test opens: until then the model does not answer, so a run stays open for as
/// long as the test needs it open, however slow the machine.
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn open(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_all();
    }

    /// Wait until opened (at most a minute, so a failed test does not hang its server).
    fn wait(&self) {
        let (open, opened) = &*self.0;
        let guard = open.lock().unwrap();
        let _ = opened
            .wait_timeout_while(guard, Duration::from_secs(60), |open| !*open)
            .unwrap();
    }
}

/// A model that answers "done" once `gate` opens. The mock server runs on a thread of its
/// own, so its blocked responder holds only the model's answer.
async fn gated_model(gate: Gate) -> MockServer {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(move |_: &Request| {
            gate.wait();
            ResponseTemplate::new(200).set_body_json(hermes_testkit::openai_answer("done", 10, 2))
        })
        .mount(&provider)
        .await;
    provider
}

/// Whether `env` has a Forge presence lease held.
async fn lease_held(env: &TestEnv) -> bool {
    count(&env.db(), "SELECT count(*) FROM leases", &[]).await > 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_11_agents_me_then_heartbeats_online_busy_at_capacity_and_offline_on_stop() {
    // One run at a time: a single open Forge run makes the agent BUSY.
    let forge = FakeForge::new().max_concurrent(1);
    forge.assign("run_1", "iss_1");
    let forge_server = forge.serve().await;
    let provider = slow_model(Duration::from_secs(4)).await;
    let mut env = forge_agent_env(&forge_server, &provider.uri()).await;
    env.set("HERMES_FORGE_HEARTBEAT_SECS", "1");
    let fleet = env.start(&Service::ALL).await;
    forge_tools_published(&env, 9).await;

    let calls = presence_calls(&forge, 3, "agents.me and two heartbeats").await;
    assert_eq!(calls[0].tool, "agents.me");
    assert_eq!(calls[0].arguments, json!({}));
    assert_eq!(statuses(&calls[1..3]), ["ONLINE", "ONLINE"]);
    assert!(
        calls
            .iter()
            .all(|c| c.authorization.as_deref() == Some("Bearer forge_sk_live_victor"))
    );

    // While the woken run waits on the model, its agent is at capacity: BUSY.
    let taken = wake(&fleet, &contract_wake("AGENT_ASSIGNED", "iss_1"), "dlv_p1").await;
    eventually(Duration::from_secs(30), "a BUSY heartbeat", || async {
        statuses(&forge.presence())
            .contains(&"BUSY".to_string())
            .then_some(())
    })
    .await;
    let (status, ..) = closed(&env, taken).await;
    assert_eq!(status, "completed");
    // Closed, the agent has room again: ONLINE after the BUSY ones.
    eventually(Duration::from_secs(30), "ONLINE after BUSY", || async {
        let seen = statuses(&forge.presence());
        let busy = seen.iter().rposition(|s| s == "BUSY")?;
        seen[busy..].contains(&"ONLINE".to_string()).then_some(())
    })
    .await;
    let metrics = fleet.metrics().await;
    let sent = |status: &str| {
        metric(
            &metrics,
            &format!("hermes_forge_heartbeats_total{{outcome=\"sent\",status=\"{status}\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert!(sent("ONLINE") >= 2.0 && sent("BUSY") >= 1.0, "{metrics}");

    // A graceful stop says OFFLINE last and gives the lease up; `agents.me` was asked once.
    assert!(lease_held(&env).await);
    fleet.stop().await.unwrap();
    let calls = forge.presence();
    assert_eq!(statuses(&calls).last().map(String::as_str), Some("OFFLINE"));
    assert_eq!(calls.iter().filter(|c| c.tool == "agents.me").count(), 1);
    assert!(!lease_held(&env).await, "the lease is released on stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_11_a_change_of_status_is_sent_at_once_not_at_the_next_interval() {
    let forge = FakeForge::new().max_concurrent(1);
    forge.assign("run_1", "iss_1");
    let forge_server = forge.serve().await;
    let gate = Gate::default();
    let provider = gated_model(gate.clone()).await;
    let mut env = forge_agent_env(&forge_server, &provider.uri()).await;
    // An interval no test outlives: every heartbeat after the first is a change.
    env.set("HERMES_FORGE_HEARTBEAT_SECS", "3600");
    let fleet = env.start(&Service::ALL).await;
    forge_tools_published(&env, 9).await;
    let calls = presence_calls(&forge, 2, "agents.me and the first heartbeat").await;
    assert_eq!(statuses(&calls), ["ONLINE"]);

    // The woken run fills the agent's one slot: BUSY, without waiting for the interval.
    let taken = wake(&fleet, &contract_wake("AGENT_ASSIGNED", "iss_1"), "dlv_c1").await;
    eventually(Duration::from_secs(30), "BUSY sent at once", || async {
        (statuses(&forge.presence()) == ["ONLINE", "BUSY"]).then_some(())
    })
    .await;
    // The run closes: ONLINE at once, so the Forge's held runs need not wait an hour.
    gate.open();
    let (status, ..) = closed(&env, taken).await;
    assert_eq!(status, "completed");
    eventually(Duration::from_secs(30), "ONLINE sent at once", || async {
        (statuses(&forge.presence()) == ["ONLINE", "BUSY", "ONLINE"]).then_some(())
    })
    .await;
    fleet.stop().await.unwrap();
    assert_eq!(
        statuses(&forge.presence()),
        ["ONLINE", "BUSY", "ONLINE", "OFFLINE"],
        "a status that stays is not sent again between intervals"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn item_11_of_two_replicas_only_the_lease_holder_sends_and_the_other_takes_over() {
    let forge = FakeForge::new();
    let forge_server = forge.serve().await;
    let provider = slow_model(Duration::ZERO).await;
    let mut env = forge_agent_env(&forge_server, &provider.uri()).await;
    env.set("HERMES_FORGE_HEARTBEAT_SECS", "1");
    let first = env.start(&Service::ALL).await;
    forge_tools_published(&env, 9).await;
    presence_calls(&forge, 2, "the first replica's heartbeat").await;
    // A second tools replica with its own key, so the Forge can tell who sent what; it is
    // ready once its Forge session has listed the tools.
    forge_config(&mut env, &forge_server, "replica_b");
    let second = env.start(&[Service::Tools]).await;
    let from = forge.presence().len();
    let calls = presence_calls(&forge, from + 5, "five heartbeats with both up").await;
    let senders: Vec<_> = calls[from..]
        .iter()
        .map(|c| c.authorization.clone().unwrap_or_default())
        .collect();
    assert!(
        senders.iter().all(|s| s == "Bearer forge_sk_live_victor"),
        "only the lease holder sends: {senders:?}"
    );

    // The holder stops: OFFLINE, the lease given up, and the other replica takes it over.
    first.stop().await.unwrap();
    let stopped = forge.presence().len();
    assert_eq!(
        statuses(&forge.presence()).last().map(String::as_str),
        Some("OFFLINE")
    );
    let calls = presence_calls(&forge, stopped + 2, "the second replica's heartbeats").await;
    let taken_over = &calls[stopped..];
    assert_eq!(
        taken_over[0].tool, "agents.me",
        "the new holder asks who it is"
    );
    assert!(
        taken_over
            .iter()
            .all(|c| c.authorization.as_deref() == Some("Bearer replica_b"))
    );
    assert_eq!(statuses(taken_over)[0], "ONLINE");
    second.stop().await.unwrap();
}
