//! The bus guarantees: idempotent consumers, poison parked after the delivery limit, and
//! queue arguments as docs/architecture.md#8-the-bus states them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::anyhow;
use hermes::Service;
use hermes_bus::Stage;
use hermes_db::Transaction;
use hermes_runtime::Ctx;
use hermes_runtime::stage::{self, Handler, ParkCause, StageError};
use hermes_telemetry::Metrics;
use hermes_testkit::{TestEnv, api_inbound, count, eventually};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_router_message_twice_creates_one_run() {
    let env = TestEnv::new().await;
    // The router alone: its llm requests stay in the outbox/queue for us to count.
    let fleet = env.start(&[Service::Router]).await;
    let bus = env.bus().await;
    let run = RunId::new();
    let env_msg = Envelope::new(run, None, &api_inbound("hi twice"));
    bus.publish(&env_msg).await.unwrap();
    bus.publish(&env_msg).await.unwrap();

    let db = env.db();
    let processed = eventually(
        Duration::from_secs(15),
        "both deliveries processed",
        || async {
            let c = db.get().await.ok()?;
            let queue = bus.names().queue(Stage::Router);
            let (waiting, _) = bus.queue_stats(&queue).await.ok()?;
            let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM processed_messages WHERE message_id = $1",
                    &[&env_msg.id.as_uuid()],
                )
                .await
                .ok()?
                .get(0);
            (waiting == 0 && n == 1).then_some(n)
        },
    )
    .await;
    assert_eq!(processed, 1);
    // Once the second delivery is acked as a duplicate, nothing more can come of it.
    let duplicate = format!(
        "hermes_bus_messages_total{{outcome=\"duplicate\",queue=\"{}.router\"}} 1",
        env.ns
    );
    eventually(
        Duration::from_secs(15),
        "the second delivery acked as a duplicate",
        || async { fleet.metrics().await.contains(&duplicate).then_some(()) },
    )
    .await;
    let runs = count(
        &db,
        "SELECT count(*) FROM agent_runs WHERE id = $1",
        &[&run.as_uuid()],
    )
    .await;
    assert_eq!(runs, 1);
    let emitted = count(&db, "SELECT count(*) FROM outbox WHERE stage = 'llm'", &[]).await;
    assert_eq!(emitted, 1, "one llm request, not two");
    let metrics = fleet.metrics().await;
    assert!(metrics.contains(&duplicate), "{metrics}");
    bus.close().await;
    fleet.stop().await.unwrap();
}

/// A handler whose dependency is always down, and which records why its messages were
/// parked.
#[derive(Clone, Default)]
struct AlwaysFails(Arc<Mutex<Vec<ParkCause>>>);

impl Handler for AlwaysFails {
    const STAGE: Stage = Stage::Webhooks;
    type Prepared = ();
    type After = ();

    async fn prepare(&self, _env: &Envelope) -> Result<(), StageError> {
        Err(StageError::Transient(anyhow!("dependency unavailable")))
    }

    async fn commit(
        &self,
        _env: &Envelope,
        _p: (),
        _tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, ()), StageError> {
        unreachable!("prepare always fails")
    }

    async fn on_parked(&self, _env: &Envelope, cause: ParkCause) -> anyhow::Result<Vec<Envelope>> {
        self.0.lock().unwrap().push(cause);
        Ok(Vec::new())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_always_fails_is_parked_after_the_delivery_limit() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_DELIVERY_LIMIT", "2");
    let ctx = Ctx::connect(env.config(), Metrics::new()).await.unwrap();
    let stop = CancellationToken::new();
    let handler = AlwaysFails::default();
    let consumer = tokio::spawn(stage::run(ctx.with_stop(stop.clone()), handler.clone()));

    let mut msg = hermes_bus::Outgoing::from_envelope(&Envelope::new(
        RunId::new(),
        None,
        &api_inbound("poison"),
    ));
    msg.stage = Stage::Webhooks;
    ctx.bus.publish_outgoing(&msg).await.unwrap();

    let parking = ctx.bus.names().parking(Stage::Webhooks);
    eventually(
        Duration::from_secs(30),
        "the message in the parking queue",
        || async {
            let (n, _) = ctx.bus.queue_stats(&parking).await.ok()?;
            (n == 1).then_some(())
        },
    )
    .await;
    let (work, _) = ctx
        .bus
        .queue_stats(&ctx.bus.names().queue(Stage::Webhooks))
        .await
        .unwrap();
    assert_eq!(work, 0);
    // Initial delivery and 2 redeliveries; the last one the broker allows is parked by the
    // stage itself (so its handler can end its run), not dead-lettered by the broker behind
    // its back.
    let counted = |outcome: &str| {
        ctx.metrics
            .bus
            .messages
            .with_label_values(&[&ctx.bus.names().queue(Stage::Webhooks), outcome])
            .get()
    };
    assert_eq!((counted("requeued"), counted("rejected")), (2, 1));
    // Its stage was told once, before the reject, why it was parked.
    assert_eq!(*handler.0.lock().unwrap(), vec![ParkCause::DeliveryLimit]);
    stop.cancel();
    consumer.await.unwrap();

    // Undecodable bytes are parked at once, without retries.
    let garbage = hermes_bus::Outgoing {
        stage: Stage::Router,
        message_id: hermes_types::ids::MessageId::new(),
        traceparent: None,
        body: b"not an envelope".to_vec(),
    };
    let stop2 = CancellationToken::new();
    let router2 = tokio::spawn(hermes_router::run(ctx.with_stop(stop2.clone())));
    ctx.bus.publish_outgoing(&garbage).await.unwrap();
    let router_parking = ctx.bus.names().parking(Stage::Router);
    eventually(Duration::from_secs(15), "garbage parked", || async {
        let (n, _) = ctx.bus.queue_stats(&router_parking).await.ok()?;
        (n == 1).then_some(())
    })
    .await;
    stop2.cancel();
    router2.await.unwrap().unwrap();
    ctx.bus.close().await;
}

/// The frame size sets most of an idle process's memory (two buffers of 32 frames per
/// connection), so the fleet asks for `HERMES_AMQP_FRAME_MAX` instead of the broker's
/// 128 KiB, a URL's own `frame_max` winning, and a message larger than a frame still
/// travels whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bus_asks_for_its_frame_size_and_a_larger_message_travels_whole() {
    let env = TestEnv::new().await;
    let config = env.config();
    let connect = |url: String, frame_max: u32| {
        let mut settings = config.bus.clone();
        settings.frame_max = frame_max;
        let names = hermes_bus::Names::new(hermes_config::Namespace::parse(&env.ns).unwrap());
        hermes_bus::Bus::connect(url.into(), names, settings, Metrics::new())
    };
    let url = secrecy::ExposeSecret::expose_secret(&config.amqp_url).to_string();
    let bus = connect(url.clone(), 8192).await.unwrap();
    assert_eq!(bus.frame_max().await, Some(8192));
    let sep = if url.contains('?') { '&' } else { '?' };
    let own = connect(format!("{url}{sep}frame_max=4096"), 8192)
        .await
        .unwrap();
    assert_eq!(
        own.frame_max().await,
        Some(4096),
        "the URL's frame_max wins"
    );
    own.close().await;

    // A reply of 40,000 characters crosses several 8 KiB frames on the way in and out.
    let text = "x".repeat(40_000);
    let message = Envelope::new(RunId::new(), None, &api_inbound(&text));
    bus.publish(&message).await.unwrap();
    // The publish was confirmed, so the message is in the queue already.
    let got = hermes_testkit::fakes::drain(&bus, Stage::Router).await;
    assert_eq!(got.len(), 1);
    let got = &got[0];
    assert_eq!(got.id, message.id);
    assert_eq!(got.payload, message.payload);
    bus.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_arguments_match_the_design() {
    let env = TestEnv::new().await;
    let bus = env.bus().await;
    let out = std::process::Command::new("rabbitmqctl")
        .args([
            "list_queues",
            "--quiet",
            "--formatter",
            "json",
            "name",
            "arguments",
            "type",
            "durable",
        ])
        .output();
    match out {
        Ok(out) if out.status.success() => {
            let queues: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            // rabbitmqctl lists arguments as [name, type, value] triples; make them a map.
            let find = |name: String| {
                let mut q = queues
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|q| q["name"] == name.as_str())
                    .unwrap_or_else(|| panic!("{name} not declared"))
                    .clone();
                let args: serde_json::Map<String, serde_json::Value> = q["arguments"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| (t[0].as_str().unwrap().to_string(), t[2].clone()))
                    .collect();
                q["arguments"] = args.into();
                q
            };
            for stage in Stage::ALL {
                let work = find(bus.names().queue(stage));
                let a = &work["arguments"];
                assert_eq!(work["type"], "quorum");
                assert_eq!(work["durable"], true);
                assert_eq!(a["x-queue-type"], "quorum");
                assert_eq!(a["x-delivery-limit"], 5);
                assert_eq!(a["x-dead-letter-exchange"], format!("{}.dead", env.ns));
                assert_eq!(a["x-dead-letter-strategy"], "at-least-once");
                assert_eq!(a["x-overflow"], "reject-publish");
                let parking = find(bus.names().parking(stage));
                let p = &parking["arguments"];
                assert_eq!(parking["type"], "quorum");
                assert_eq!(p["x-message-ttl"], 7 * 24 * 3600 * 1000);
                assert_eq!(p["x-max-length"], 5000);
                assert_eq!(p["x-overflow"], "reject-publish");
            }
        }
        _ => {
            // No rabbitmqctl here (broker in a container): the broker still checks that a
            // re-declaration with different arguments is refused, which proves what it holds.
            use lapin::options::QueueDeclareOptions;
            let channel = bus.channel().await.unwrap();
            let mut args = hermes_bus::work_queue_args(bus.names(), &env.config().bus);
            args.insert(
                "x-delivery-limit".into(),
                lapin::types::AMQPValue::LongLongInt(99),
            );
            let refused = channel
                .queue_declare(
                    bus.names().queue(Stage::Llm).into(),
                    QueueDeclareOptions {
                        durable: true,
                        ..Default::default()
                    },
                    args,
                )
                .await;
            assert!(
                refused.is_err(),
                "a different x-delivery-limit must be refused by the broker"
            );
        }
    }
    bus.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_reconnects_after_losing_the_broker() {
    let mut env = TestEnv::new().await;
    let proxy = env.broker_behind_proxy().await;
    let fleet = env.start(&Service::ALL).await;
    assert_eq!(fleet.chat("before").await.status(), 200);

    proxy.cut();
    // The supervisor notices, reconnects, re-declares the topology and the consumers
    // re-subscribe; meanwhile ingest answers 503 rather than accept what it cannot queue.
    let body: serde_json::Value = eventually(
        Duration::from_secs(30),
        "an answer after reconnecting",
        || async {
            let r = fleet.chat("after").await;
            if r.status() == 200 {
                r.json().await.ok()
            } else {
                None
            }
        },
    )
    .await;
    assert_eq!(body["choices"][0]["message"]["content"], "echo: after");
    let metrics = fleet.metrics().await;
    assert!(
        !metrics.contains("hermes_bus_reconnects_total 0"),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_platform_message_makes_one_run_even_past_the_redis_dedupe() {
    use hermes_types::model::Platform;
    let env = TestEnv::new().await;
    let fleet = env.start(&[Service::Router]).await;
    let bus = env.bus().await;
    // The same WhatsApp message twice under two run ids, as when Redis lost the dedupe key.
    let mut inbound = api_inbound("hola");
    inbound.event.platform = Platform::Whatsapp;
    env.user(Platform::Whatsapp, &inbound.event.sender_id, 5)
        .await;
    inbound.event.external_message_id = Some("wamid.SAME".into());
    inbound.conversation.clear();
    let (a, b) = (RunId::new(), RunId::new());
    bus.publish(&Envelope::new(a, None, &inbound))
        .await
        .unwrap();
    bus.publish(&Envelope::new(b, None, &inbound))
        .await
        .unwrap();
    let db = env.db();
    // One is routed; the other is recognized as a duplicate, rolled back and acked.
    eventually(Duration::from_secs(15), "both messages handled", || async {
        let m = fleet.metrics().await;
        (m.contains("hermes_router_decisions_total{decision=\"routed\"} 1")
            && m.contains("hermes_router_decisions_total{decision=\"duplicate\"} 1"))
        .then_some(())
    })
    .await;
    let runs = count(
        &db,
        "SELECT count(*) FROM agent_runs WHERE external_message_id = 'wamid.SAME'",
        &[],
    )
    .await;
    assert_eq!(runs, 1);
    let emitted = count(&db, "SELECT count(*) FROM outbox WHERE stage = 'llm'", &[]).await;
    assert_eq!(emitted, 1, "the duplicate reaches no model");
    // One credit charged and counted, however the two commits were grouped and redone.
    assert!(
        fleet
            .metrics()
            .await
            .contains("hermes_credits_total{reason=\"charge\"} 1")
    );
    bus.close().await;
    fleet.stop().await.unwrap();
}

/// A grouped handler that records which transaction committed each message, and refuses the
/// message whose text is "poison".
struct GroupProbe;

impl Handler for GroupProbe {
    const STAGE: Stage = Stage::Webhooks;
    type Prepared = String;
    type After = ();

    async fn prepare(&self, env: &Envelope) -> Result<String, StageError> {
        let inbound: hermes_types::model::Inbound = env.payload()?;
        Ok(inbound.event.text.unwrap_or_default())
    }

    async fn commit(
        &self,
        env: &Envelope,
        text: String,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, ()), StageError> {
        if text == "poison" {
            return Err(StageError::Poison(anyhow!("refused by the probe")));
        }
        tx.execute(
            "INSERT INTO group_probe (message_id, txid) VALUES ($1, txid_current())
             ON CONFLICT DO NOTHING",
            &[&env.id.as_uuid()],
        )
        .await
        .map_err(|e| StageError::Transient(e.into()))?;
        Ok((Vec::new(), ()))
    }
}

impl stage::GroupCommit for GroupProbe {
    fn lock_key(_text: &String) -> Option<uuid::Uuid> {
        None
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grouped_commits_share_transactions_and_one_bad_message_spoils_none_of_the_others() {
    let mut env = TestEnv::new().await;
    // The burst (22 deliveries) makes groups of 8, 8 and 6. Only the groups holding the poison
    // and the duplicate are redone one by one: at most 16 messages, so at most 14 good ones
    // alone and the group of 6 together, wherever the two land.
    env.set("HERMES_COMMIT_GROUP", "8");
    let ctx = Ctx::connect(env.config(), Metrics::new()).await.unwrap();
    ctx.db
        .get()
        .await
        .unwrap()
        .batch_execute(
            "CREATE TABLE group_probe (message_id uuid PRIMARY KEY, txid bigint NOT NULL)",
        )
        .await
        .unwrap();
    // The committers wait for the whole burst, so grouping does not depend on timing.
    stage::hold_for_burst(&env.ns, 22);
    let stop = CancellationToken::new();
    let consumer = tokio::spawn(stage::run_grouped(ctx.with_stop(stop.clone()), GroupProbe));

    let publish = |env: Envelope| {
        let mut msg = hermes_bus::Outgoing::from_envelope(&env);
        msg.stage = Stage::Webhooks;
        let bus = ctx.bus.clone();
        async move { bus.publish_outgoing(&msg).await.unwrap() }
    };
    // 20 good messages, one of them delivered twice, and one poison message.
    let good: Vec<Envelope> = (0..20)
        .map(|i| Envelope::new(RunId::new(), None, &api_inbound(&format!("good {i}"))))
        .collect();
    let poison = Envelope::new(RunId::new(), None, &api_inbound("poison"));
    let mut burst: Vec<Envelope> = good.clone();
    burst.insert(7, poison.clone());
    burst.insert(12, good[3].clone());
    futures_util::future::join_all(burst.into_iter().map(publish)).await;

    let parking = ctx.bus.names().parking(Stage::Webhooks);
    eventually(Duration::from_secs(30), "the poison parked", || async {
        let (n, _) = ctx.bus.queue_stats(&parking).await.ok()?;
        (n == 1).then_some(())
    })
    .await;
    let db = env.db();
    eventually(
        Duration::from_secs(30),
        "every good message committed",
        || async {
            let n = count(&db, "SELECT count(*) FROM group_probe", &[]).await;
            (n == 20).then_some(())
        },
    )
    .await;
    let ids: Vec<uuid::Uuid> = good.iter().map(|e| e.id.as_uuid()).collect();
    let recorded = count(
        &db,
        "SELECT count(*) FROM processed_messages WHERE consumer = 'webhooks' AND message_id = ANY($1)",
        &[&ids],
    )
    .await;
    assert_eq!(
        recorded, 20,
        "each good message recorded once, the duplicate too"
    );
    let poisoned = count(
        &db,
        "SELECT count(*) FROM processed_messages WHERE message_id = $1",
        &[&poison.id.as_uuid()],
    )
    .await;
    assert_eq!(poisoned, 0, "the poison message committed nothing");
    // Grouping happened: fewer transactions than messages.
    let transactions = count(&db, "SELECT count(DISTINCT txid) FROM group_probe", &[]).await;
    assert!(
        transactions < 20,
        "{transactions} transactions for 20 messages"
    );
    let sizes = ctx
        .metrics
        .stages
        .commit_batch_size
        .with_label_values(&["webhooks"]);
    assert!(sizes.get_sample_sum() > sizes.get_sample_count() as f64);
    // The group holding the poison (and the one holding the duplicate, if apart) was redone
    // message by message.
    let fallbacks = ctx
        .metrics
        .stages
        .commit_batch_fallbacks
        .with_label_values(&["webhooks"])
        .get();
    assert!((1..=2).contains(&fallbacks), "{fallbacks} groups redone");
    let duplicates = ctx
        .metrics
        .bus
        .messages
        .with_label_values(&[&ctx.bus.names().queue(Stage::Webhooks), "duplicate"])
        .get();
    assert_eq!(duplicates, 1);
    stop.cancel();
    consumer.await.unwrap();
    ctx.bus.close().await;
}
