//! Tool calls that wait for an operator (docs/operator-mcp.md, approvals): a fake model asks
//! for `current_time`, which the configuration gates with `[tools] require_approval`; the
//! run waits in `awaiting_approval` without running it; then an allow runs it once (also
//! when two operators answer at once), a deny (through the CLI) and a timeout each give the
//! model a structured denial, and the run finishes with the model's answer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hermes::Service;
use hermes::cli::approvals::decide;
use hermes_bus::Bus;
use hermes_db::approvals::{self, Answered, Approval, Status};
use hermes_db::{Db, runs};
use hermes_testkit::{
    Fleet, TestEnv, count, eventually, metric, openai_tool_then_answer, send, tool_result,
};
use hermes_types::ids::RunId;
use hermes_types::model::{Platform, Verdict};
use serde_json::{Value, json};
use tokio::sync::Barrier;
use wiremock::MockServer;

const ASK: &str = "what time is it in Tokyo right now?";
const RAN: &str = "hermes_tool_calls_total{outcome=\"ok\",tool=\"current_time\"}";

/// A provider that asks for `current_time` first and answers once it sees a tool result.
async fn provider() -> MockServer {
    openai_tool_then_answer("current_time", &json!({"timezone": "Asia/Tokyo"}), "done").await
}

/// This test's configuration file: `current_time` waits for approval.
fn gated_config(ns: &str) -> PathBuf {
    let file = std::env::temp_dir().join(format!("{ns}-approvals.toml"));
    std::fs::write(&file, "[tools]\nrequire_approval = [\"current_time\"]\n").unwrap();
    file
}

/// A fleet whose model asks for the gated `current_time`, with one run of it sent.
pub(crate) struct Gated {
    pub(crate) provider: MockServer,
    pub(crate) env: TestEnv,
    config: PathBuf,
    pub(crate) fleet: Fleet,
    bus: Bus,
    pub(crate) db: Db,
    pub(crate) run: RunId,
}

impl Gated {
    /// Start the fleet with `vars` on top of the test defaults and send the question.
    pub(crate) async fn start(vars: &[(&str, &str)]) -> Self {
        let provider = provider().await;
        let mut env = TestEnv::new().await;
        let config = gated_config(&env.ns);
        env.openai_mock(&format!("{}/v1", provider.uri()))
            .set("HERMES_MODEL", "gpt-test")
            .set("HERMES_CONFIG", config.to_str().unwrap());
        for (name, value) in vars {
            env.set(name, value);
        }
        env.user(Platform::Rest, "asker", 50).await;
        let fleet = env.start(&Service::ALL).await;
        let bus = env.bus().await;
        let db = env.db();
        let run = send(&bus, "asker", ASK).await;
        Self {
            provider,
            env,
            config,
            fleet,
            bus,
            db,
            run,
        }
    }

    /// Whether `current_time` ran, by the tools stage's own count.
    pub(crate) async fn tool_ran(&self) -> Option<f64> {
        metric(&self.fleet.metrics().await, RAN)
    }

    pub(crate) async fn stop(self) {
        self.bus.close().await;
        self.fleet.stop().await.unwrap();
        let _ = std::fs::remove_file(self.config);
    }
}

/// The run's stored status.
async fn status(db: &Db, run: RunId) -> Option<String> {
    let c = db.get().await.unwrap();
    c.query_opt("SELECT status FROM agent_runs WHERE id = $1", &[&run])
        .await
        .unwrap()
        .map(|r| r.get(0))
}

/// Wait until the run waits for an operator, and return its waiting call.
pub(crate) async fn waiting_call(db: &Db, run: RunId) -> Approval {
    eventually(
        Duration::from_secs(30),
        "the run awaiting approval",
        || async { (status(db, run).await.as_deref() == Some("awaiting_approval")).then_some(()) },
    )
    .await;
    let open = approvals::list_open(&db.get().await.unwrap(), 10)
        .await
        .unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].run_id, run);
    assert_eq!(open[0].tool, "current_time");
    assert_eq!(open[0].arguments, json!({"timezone": "Asia/Tokyo"}));
    open[0].clone()
}

/// Wait until the run is completed with the model's final answer.
pub(crate) async fn completed(db: &Db, run: RunId) {
    let out = eventually(Duration::from_secs(30), "the run completed", || async {
        let c = db.get().await.unwrap();
        let row = c
            .query_opt(
                "SELECT status, output_text FROM agent_runs WHERE id = $1",
                &[&run],
            )
            .await
            .unwrap()?;
        let (s, out): (String, Option<String>) = (row.get(0), row.get(1));
        (s == "completed").then_some(out)
    })
    .await;
    assert_eq!(out.as_deref(), Some("done"));
}

/// The tool turn the model got: exactly one request (the resumed round's) carries one;
/// the others are the first call and the memory extraction that follows a finished run.
pub(crate) async fn tool_turn(provider: &MockServer) -> Value {
    let got = provider.received_requests().await.unwrap();
    let turns: Vec<Value> = got
        .iter()
        .filter_map(|r| tool_result(&serde_json::from_slice(&r.body).unwrap()))
        .collect();
    assert_eq!(turns.len(), 1, "one request carries the tool result");
    turns[0].clone()
}

/// The run's events of `kind`, each placed in the run's conversation (platform and chat).
async fn events(db: &Db, run: RunId, kind: &str) -> i64 {
    count(
        db,
        "SELECT count(*) FROM events WHERE run_id = $1 AND kind = $2
           AND platform = 'rest' AND chat_id IS NOT NULL",
        &[&run, &kind],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_call_waits_and_runs_once_when_two_operators_allow_it_at_once() {
    let t = Gated::start(&[]).await;
    let (db, run) = (&t.db, t.run);
    let call = waiting_call(db, run).await;
    assert_eq!(events(db, run, "approval_requested").await, 1);
    assert_eq!(t.provider.received_requests().await.unwrap().len(), 1);
    assert_eq!(t.tool_ran().await, None, "the tool has not run");
    let metrics = t.fleet.metrics().await;
    assert_eq!(
        metric(&metrics, "hermes_approvals_total{outcome=\"requested\"}"),
        Some(1.0),
        "{metrics}"
    );

    // Two operators answer at the same moment: one decides, the other is told.
    let barrier = Arc::new(Barrier::new(2));
    let answers = ["ops:ana", "ops:bob"].map(|by| {
        let (db, barrier) = (db.clone(), barrier.clone());
        tokio::spawn(async move {
            barrier.wait().await;
            decide(&db, call.id, Verdict::Allowed, by, None)
                .await
                .unwrap()
        })
    });
    let mut decided = 0;
    let mut already = 0;
    for answer in answers {
        match answer.await.unwrap() {
            Answered::Decided { resumed, .. } => {
                assert!(resumed, "the round's only call was answered");
                decided += 1;
            }
            Answered::AlreadyDecided(a) => {
                assert_eq!(a.status, Status::Decided(Verdict::Allowed));
                already += 1;
            }
            Answered::NotFound | Answered::PastDeadline { .. } => {
                panic!("the call vanished or timed out")
            }
        }
    }
    assert_eq!((decided, already), (1, 1));

    completed(db, run).await;
    let result = tool_turn(&t.provider).await;
    assert!(result.get("refused").is_none(), "the tool ran: {result}");
    assert_eq!(events(db, run, "approval_resolved").await, 1);
    assert_eq!(t.tool_ran().await, Some(1.0), "ran exactly once");
    let metrics = t.fleet.metrics().await;
    assert_eq!(
        metric(&metrics, "hermes_approvals_total{outcome=\"allowed\"}"),
        Some(1.0),
        "{metrics}"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_denied_from_the_cli_reaches_the_model_as_a_denial() {
    let t = Gated::start(&[]).await;
    let call = waiting_call(&t.db, t.run).await;
    let id = call.id.to_string();

    let (code, out, err) = t.env.hermes(&["approvals", "list"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&id) && out.contains("current_time"), "{out}");
    let (code, out, err) = t
        .env
        .hermes(&["approvals", "deny", &id, "--reason", "no clocks today"])
        .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("denied") && out.contains("the run resumes"),
        "{out}"
    );
    // A second answer changes nothing, says who answered, and fails.
    let (code, _, err) = t.env.hermes(&["approvals", "allow", &id]).await;
    assert_ne!(code, 0);
    assert!(err.contains("already denied by cli:"), "{err}");

    completed(&t.db, t.run).await;
    let result = tool_turn(&t.provider).await;
    assert_eq!(result["denied"], true, "{result}");
    assert_eq!(result["verdict"], "denied", "{result}");
    assert_eq!(result["operator_reason"], "no clocks today", "{result}");
    assert_eq!(result["tool"], "current_time", "{result}");
    assert_eq!(t.tool_ran().await, None, "never ran");
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_call_is_denied_as_timed_out() {
    let t = Gated::start(&[
        ("HERMES_APPROVAL_TIMEOUT", "1s"),
        ("HERMES_APPROVAL_SWEEP_SECS", "1"),
    ])
    .await;
    completed(&t.db, t.run).await;
    let result = tool_turn(&t.provider).await;
    assert_eq!(result["denied"], true, "{result}");
    assert_eq!(result["verdict"], "timed_out", "{result}");
    assert_eq!(result["reason"], "approval_timed_out", "{result}");
    let c = t.db.get().await.unwrap();
    let answered: String = c
        .query_one(
            "SELECT status FROM tool_approvals WHERE run_id = $1",
            &[&t.run],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(answered, "timed_out");
    assert_eq!(t.tool_ran().await, None, "never ran");
    let metrics = t.fleet.metrics().await;
    assert_eq!(
        metric(&metrics, "hermes_approvals_total{outcome=\"timed_out\"}"),
        Some(1.0),
        "{metrics}"
    );
    drop(c);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_run_is_not_stuck_and_a_stop_ends_it_cancelled() {
    let t = Gated::start(&[("HERMES_APPROVAL_SWEEP_SECS", "1")]).await;
    let (db, run) = (&t.db, t.run);
    let call = waiting_call(db, run).await;

    // The stuck-run sweeper, even told that every open run is stuck, leaves it alone.
    {
        let mut c = db.get().await.unwrap();
        let tx = c.transaction().await.unwrap();
        let swept = runs::close::stuck(&tx, Duration::ZERO, 100, "stuck")
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert!(swept.iter().all(|r| r.id != run), "{swept:?}");
    }
    assert_eq!(status(db, run).await.as_deref(), Some("awaiting_approval"));

    // A stop while it waits: the sweeper denies the call, the round resumes and cancels.
    assert!(
        runs::request_stop(&db.get().await.unwrap(), run)
            .await
            .unwrap()
    );
    eventually(Duration::from_secs(30), "the run cancelled", || async {
        (status(db, run).await.as_deref() == Some("cancelled")).then_some(())
    })
    .await;
    let answered = approvals::get(&db.get().await.unwrap(), call.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answered.status, Status::Decided(Verdict::Denied));
    assert_eq!(t.tool_ran().await, None, "never ran");
    assert_eq!(t.provider.received_requests().await.unwrap().len(), 1);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allow_after_the_deadline_is_refused_and_the_call_times_out() {
    // The timeout sweeper stays out of the way: the late allow itself times the call out.
    let t = Gated::start(&[("HERMES_APPROVAL_SWEEP_SECS", "3600")]).await;
    let (db, run) = (&t.db, t.run);
    let call = waiting_call(db, run).await;
    db.get()
        .await
        .unwrap()
        .execute(
            "UPDATE tool_approvals SET deadline_at = now() - interval '1 second' WHERE id = $1",
            &[&call.id],
        )
        .await
        .unwrap();

    let operator = crate::agent_mcp::Mcp::operator(&t.fleet, hermes_testkit::KEY);
    let refused = operator
        .refused(
            "permissions_respond",
            json!({"approval_id": call.id, "decision": "allow"}),
        )
        .await;
    assert_eq!(refused["code"], "DEADLINE_PASSED", "{refused}");
    assert_eq!(refused["verdict"], "timed_out", "{refused}");
    assert_eq!(refused["approval"]["status"], "timed_out", "{refused}");
    // Decided once: a second allow (the CLI's way) is told it timed out.
    let again = decide(db, call.id, Verdict::Allowed, "cli:late", None)
        .await
        .unwrap();
    assert!(
        matches!(&again, Answered::AlreadyDecided(a) if a.status == Status::Decided(Verdict::TimedOut)),
        "{again:?}"
    );

    completed(db, run).await;
    let result = tool_turn(&t.provider).await;
    assert_eq!(result["denied"], true, "{result}");
    assert_eq!(result["verdict"], "timed_out", "{result}");
    assert_eq!(t.tool_ran().await, None, "never ran");
    t.stop().await;
}
