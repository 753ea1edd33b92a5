//! No run is left open (docs/architecture.md, poison is parked): a message parked on its
//! way to an answer ends its run with one failure reply and one refund; a reply that cannot
//! be delivered closes its run as failed and refunds it; a run open too long is swept, and a
//! late or redelivered request of the swept run calls no model, runs no tool and sends no
//! second reply.

use std::time::Duration;

use anyhow::anyhow;
use hermes::Service;
use hermes_bus::Stage;
use hermes_db::{Db, Transaction, credits};
use hermes_runtime::Ctx;
use hermes_runtime::stage::{self, Handler, ParkCause, StageError};
use hermes_telemetry::Metrics;
use hermes_testkit::{TestEnv, answered, count, eventually, metric};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{LlmRequest, Platform, ReplyTo, ToolCall, ToolRequest, parked};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use wiremock::MockServer;

const TG_TOKEN: &str = "123456:runs-closed-token";
const CHAT: &str = "5151";

/// An llm stage whose every message fails: as poison, or on its own each time. Parked, its
/// message ends its run as the llm stage's does: with a failure reply.
struct Failing(fn() -> StageError);

impl Handler for Failing {
    const STAGE: Stage = Stage::Llm;
    type Prepared = ();
    type After = ();

    async fn prepare(&self, _env: &Envelope) -> Result<(), StageError> {
        Err((self.0)())
    }

    async fn commit(
        &self,
        _env: &Envelope,
        _p: (),
        _tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, ()), StageError> {
        Err(StageError::Poison(anyhow!("prepare always fails")))
    }

    async fn on_parked(&self, env: &Envelope, _cause: ParkCause) -> anyhow::Result<Vec<Envelope>> {
        Ok(parked::failure_reply(env)?.into_iter().collect())
    }
}

/// A fake Telegram and an environment whose delivery stage sends to it.
async fn chat_env() -> (MockServer, TestEnv) {
    let api = hermes_testkit::telegram_fake(TG_TOKEN).await;
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .set("TELEGRAM_API_BASE_URL", &api.uri());
    (api, env)
}

/// A routed run for a Telegram user `chat` with 5 credits, charged 1, created `age` ago.
async fn charged_run(env: &TestEnv, chat: &str, age: Duration) -> RunId {
    let user = env.user(Platform::Telegram, chat, 5).await;
    let db = env.db();
    let mut client = db.get().await.unwrap();
    let tx = client.transaction().await.unwrap();
    let run = hermes_testkit::routed_run(&tx, Platform::Telegram, chat).await;
    credits::charge(&tx, user.id, run, 1).await.unwrap();
    tx.execute(
        "UPDATE agent_runs SET created_at = now() - make_interval(secs => $2) WHERE id = $1",
        &[&run.as_uuid(), &age.as_secs_f64()],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    run
}

fn llm_request() -> LlmRequest {
    serde_json::from_value(json!({
        "reply_to": {"platform": "telegram", "chat_id": CHAT},
        "tier": "free",
        "chain": ["mock"],
        "messages": [{"role": "user", "content": "hello"}]
    }))
    .expect("a minimal llm request")
}

/// The run's status, its refunds, and the texts the chat received.
async fn outcome(db: &Db, api: &MockServer, run: RunId) -> (String, i64, Vec<String>) {
    let status = {
        let c = db.get().await.unwrap();
        c.query_one(
            "SELECT status FROM agent_runs WHERE id = $1",
            &[&run.as_uuid()],
        )
        .await
        .unwrap()
        .get::<_, String>(0)
    };
    let refunds = count(
        db,
        "SELECT count(*) FROM credit_ledger WHERE run_id = $1 AND reason = 'refund'",
        &[&run.as_uuid()],
    )
    .await;
    let texts = api
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect();
    (status, refunds, texts)
}

async fn parked_llm_message_ends_its_run(limit: &str, error: fn() -> StageError) {
    let (api, mut env) = chat_env().await;
    env.set("HERMES_DELIVERY_LIMIT", limit);
    let run = charged_run(&env, CHAT, Duration::ZERO).await;
    let fleet = env.start(&[Service::Delivery]).await;
    let ctx = Ctx::connect(env.config(), Metrics::new()).await.unwrap();
    let stop = CancellationToken::new();
    let consumer = tokio::spawn(stage::run(ctx.with_stop(stop.clone()), Failing(error)));
    let bus = env.bus().await;
    let msg = Envelope::new(run, None, &llm_request());
    // Twice, as a redelivery or a second copy would: still one reply.
    bus.publish(&msg).await.unwrap();
    bus.publish(&msg).await.unwrap();
    let db = env.db();
    let (status, refunds, texts) = eventually(Duration::from_secs(60), "the run ended", || async {
        let o = outcome(&db, &api, run).await;
        (o.0 == "failed" && !o.2.is_empty()).then_some(o)
    })
    .await;
    assert_eq!(status, "failed");
    assert_eq!(refunds, 1, "refunded once");
    assert_eq!(texts.len(), 1, "one failure reply: {texts:?}");
    assert!(texts[0].starts_with("Sorry"), "{texts:?}");
    let (parked, _) = bus
        .queue_stats(&bus.names().parking(Stage::Llm))
        .await
        .unwrap();
    assert_eq!(parked, 2, "both copies parked");
    stop.cancel();
    consumer.await.unwrap();
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_llm_message_ends_its_run_with_one_failure_reply_and_a_refund() {
    parked_llm_message_ends_its_run("5", || StageError::Poison(anyhow!("cannot be processed")))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_past_its_delivery_limit_ends_its_run_the_same_way() {
    parked_llm_message_ends_its_run("2", || StageError::Transient(anyhow!("fails on its own")))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_that_cannot_be_delivered_closes_its_run_failed_and_refunded() {
    // No Telegram sender configured: the reply is parked as `no_sender`.
    let env = TestEnv::new().await;
    let run = charged_run(&env, CHAT, Duration::ZERO).await;
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    let reply = answered(
        ReplyTo::chat(Platform::Telegram, CHAT),
        "an answer nobody can carry",
    );
    bus.publish(&Envelope::new(run, None, &reply))
        .await
        .unwrap();
    let db = env.db();
    eventually(Duration::from_secs(30), "the run closed", || async {
        let c = db.get().await.ok()?;
        let status: String = c
            .query_one(
                "SELECT status FROM agent_runs WHERE id = $1",
                &[&run.as_uuid()],
            )
            .await
            .ok()?
            .get(0);
        (status == "failed").then_some(())
    })
    .await;
    let refunds = count(
        &db,
        "SELECT count(*) FROM credit_ledger WHERE run_id = $1 AND reason = 'refund'",
        &[&run.as_uuid()],
    )
    .await;
    assert_eq!(refunds, 1);
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_open_too_long_is_swept_once_by_racing_routers() {
    let (api, mut env) = chat_env().await;
    env.set("HERMES_RUN_STUCK_AFTER_SECS", "4");
    let stuck = charged_run(&env, CHAT, Duration::from_secs(3600)).await;
    let fresh = charged_run(&env, "5152", Duration::ZERO).await;
    let delivery = env.start(&[Service::Delivery]).await;
    let a = env.start(&[Service::Router]).await;
    let b = env.start(&[Service::Router]).await;
    let db = env.db();
    let (status, refunds, texts) =
        eventually(Duration::from_secs(30), "the stuck run swept", || async {
            let o = outcome(&db, &api, stuck).await;
            (o.0 == "failed" && !o.2.is_empty()).then_some(o)
        })
        .await;
    assert_eq!(status, "failed");
    assert_eq!(refunds, 1);
    assert_eq!(texts.len(), 1, "{texts:?}");
    let swept: f64 = [&a, &b]
        .iter()
        .map(|f| async { metric(&f.metrics().await, "hermes_runs_swept_total").unwrap_or(0.0) })
        .collect::<futures_util::future::JoinAll<_>>()
        .await
        .iter()
        .sum();
    assert_eq!(swept, 1.0, "one router swept it");
    let (fresh_status, _, _) = outcome(&db, &api, fresh).await;
    assert_eq!(fresh_status, "routed", "a young run is left alone");
    a.stop().await.unwrap();
    b.stop().await.unwrap();
    delivery.stop().await.unwrap();
}

/// The sum of every series of counter `name` in `metrics` (0 when it has none).
fn total(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_redelivered_after_the_sweep_calls_no_model_and_sends_no_second_reply() {
    let (api, mut env) = chat_env().await;
    env.set("HERMES_RUN_STUCK_AFTER_SECS", "4");
    let run = charged_run(&env, CHAT, Duration::from_secs(3600)).await;
    let sweeper = env.start(&[Service::Router, Service::Delivery]).await;
    let db = env.db();
    eventually(Duration::from_secs(30), "the stuck run swept", || async {
        let o = outcome(&db, &api, run).await;
        (o.0 == "failed" && !o.2.is_empty()).then_some(())
    })
    .await;

    // The run's model request and tool round arrive after the sweep: a backlog, or a
    // redelivery of copies the broker still held.
    let bus = env.bus().await;
    let late = Envelope::new(run, None, &llm_request());
    bus.publish(&late).await.unwrap();
    bus.publish(&late).await.unwrap();
    let round = ToolRequest {
        request: llm_request(),
        calls: vec![ToolCall {
            id: "call-1".into(),
            name: "current_time".into(),
            arguments: json!({}),
            signature: None,
        }],
        decisions: Vec::new(),
        results: Vec::new(),
    };
    bus.publish(&Envelope::new(run, None, &round))
        .await
        .unwrap();
    let stages = env.start(&[Service::Llm, Service::Tools]).await;
    let m = eventually(
        Duration::from_secs(30),
        "the late messages skipped",
        || async {
            let m = stages.metrics().await;
            let llm = metric(&m, "hermes_stage_late_messages_total{stage=\"llm\"}")?;
            let tools = metric(&m, "hermes_stage_late_messages_total{stage=\"tools\"}")?;
            (llm >= 2.0 && tools >= 1.0).then_some(m)
        },
    )
    .await;
    assert_eq!(total(&m, "hermes_llm_calls_total"), 0.0, "no model call");
    assert_eq!(total(&m, "hermes_tool_calls_total"), 0.0, "no tool call");
    for stage in [Stage::Llm, Stage::Tools] {
        let (ready, _) = bus.queue_stats(&bus.names().queue(stage)).await.unwrap();
        assert_eq!(ready, 0, "{stage:?} acked everything");
    }
    // Nothing was queued for delivery: the chat still has the sweep's notice alone.
    let (ready, _) = bus
        .queue_stats(&bus.names().queue(Stage::Delivery))
        .await
        .unwrap();
    assert_eq!(ready, 0);
    let (status, refunds, texts) = outcome(&db, &api, run).await;
    assert_eq!(status, "failed");
    assert_eq!(refunds, 1, "refunded once");
    assert_eq!(texts.len(), 1, "the notice alone: {texts:?}");
    bus.close().await;
    stages.stop().await.unwrap();
    sweeper.stop().await.unwrap();
}
