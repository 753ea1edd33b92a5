//! The outbox relay publishes what a crash left behind.

use std::time::Duration;

use hermes::Service;
use hermes_bus::Outgoing;
use hermes_testkit::{TestEnv, api_inbound, eventually};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;

/// Wait, bounded, until the router created run `run` from its inbound message.
async fn routed(db: &hermes_db::Db, run: RunId, within: Duration) {
    eventually(within, "the run created from the swept row", || async {
        let c = db.get().await.ok()?;
        let row = c
            .query_opt(
                "SELECT status FROM agent_runs WHERE id = $1",
                &[&run.as_uuid()],
            )
            .await
            .ok()??;
        Some(row.get::<_, String>(0))
    })
    .await;
}

/// The fleet's `hermes_outbox_published_total` of `path` (`eager` or `swept`).
async fn published(fleet: &hermes_testkit::Fleet, path: &str) -> Option<f64> {
    let series = format!(r#"hermes_outbox_published_total{{path="{path}"}}"#);
    hermes_testkit::metric(&fleet.metrics().await, &series)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpublished_outbox_row_is_published_by_the_relay() {
    let env = TestEnv::new().await;
    let db = env.db();
    // A stage committed this row and crashed before publishing it.
    let run = RunId::new();
    let msg = Outgoing::from_envelope(&Envelope::new(run, None, &api_inbound("left behind")));
    {
        let mut c = db.get().await.unwrap();
        let tx = c.transaction().await.unwrap();
        hermes_db::outbox::enqueue(&tx, std::slice::from_ref(&msg))
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    // A restarted router process: its relay finds the row and the router routes it.
    let fleet = env.start(&[Service::Router]).await;
    routed(&db, run, Duration::from_secs(15)).await;
    let c = db.get().await.unwrap();
    let unpublished: i64 = c
        .query_one(
            "SELECT count(*) FROM outbox WHERE message_id = $1 AND published_at IS NULL",
            &[&msg.message_id.as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(unpublished, 0);
    fleet.stop().await.unwrap();
}

/// Rows naming a stage this build does not know (a newer build's, during a rolling upgrade)
/// are left for a relay that knows it, and never starve the rows behind them: a batch
/// full of them used to be claimed, skipped and claimed again for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_an_unknown_stage_never_starve_the_relay() {
    use hermes_runtime::relay::Relay;
    use hermes_telemetry::Metrics;

    let env = TestEnv::new().await;
    let db = env.db();
    let msg = Outgoing::from_envelope(&Envelope::new(
        RunId::new(),
        None,
        &api_inbound("behind the unknown rows"),
    ));
    {
        let c = db.get().await.unwrap();
        // More than one batch (256) of rows for a stage no build of today knows, first.
        c.execute(
            "INSERT INTO outbox (message_id, stage, body)
             SELECT gen_random_uuid(), 'from_the_future', '\\x7b7d'::bytea FROM generate_series(1, 300)",
            &[],
        )
        .await
        .unwrap();
    }
    {
        let mut c = db.get().await.unwrap();
        let tx = c.transaction().await.unwrap();
        hermes_db::outbox::enqueue(&tx, std::slice::from_ref(&msg))
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    let bus = env.bus().await;
    let relay = Relay::new(db.clone(), bus.clone(), Metrics::new());
    let (published, failed) = relay.publish_batch().await.unwrap();
    assert_eq!((published, failed), (1, 0));
    let c = db.get().await.unwrap();
    let left = |sql: &'static str| {
        let c = &c;
        async move { c.query_one(sql, &[]).await.unwrap().get::<_, i64>(0) }
    };
    assert_eq!(
        left("SELECT count(*) FROM outbox WHERE stage = 'router' AND published_at IS NULL").await,
        0
    );
    assert_eq!(
        left(
            "SELECT count(*) FROM outbox WHERE stage = 'from_the_future' AND published_at IS NULL"
        )
        .await,
        300,
        "the unknown rows wait, unpublished"
    );
    bus.close().await;
}

/// The row a stage commits goes out from that stage right after its commit and is marked
/// by the process's marker, never claimed by the relay (docs/architecture.md#2-every-state-change-travels-with-its-message-the-outbox).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_publishes_its_own_rows_and_marks_them() {
    use hermes_bus::Stage;
    use hermes_testkit::drain;

    let env = TestEnv::new().await;
    env.user(hermes_types::model::Platform::Rest, "eager", 5)
        .await;
    let db = env.db();
    let bus = env.bus().await;
    let fleet = env.start(&[Service::Router]).await;
    let run = hermes_testkit::send(&bus, "eager", "publish me yourself").await;
    eventually(
        Duration::from_secs(15),
        "a row published by the router itself",
        || async { (published(&fleet, "eager").await? >= 1.0).then_some(()) },
    )
    .await;
    // The router's row for the llm stage: published, and marked, by the router itself.
    let published_by_router = eventually(
        Duration::from_secs(15),
        "the router's outbox row marked published",
        || async {
            let c = db.get().await.ok()?;
            let row = c
                .query_opt(
                    "SELECT held_until IS NOT NULL FROM outbox
                     WHERE stage = 'llm' AND published_at IS NOT NULL",
                    &[],
                )
                .await
                .ok()??;
            Some(row.get::<_, bool>(0))
        },
    )
    .await;
    assert!(
        published_by_router,
        "the row was written for its stage to publish"
    );
    assert_eq!(
        published(&fleet, "swept").await,
        Some(0.0),
        "the relay claimed nothing"
    );
    fleet.stop().await.unwrap();
    let sent = drain(&bus, Stage::Llm).await;
    assert_eq!(sent.len(), 1, "published once");
    assert_eq!(sent[0].run_id, run);
    bus.close().await;
}

/// A stage that crashed between its commit and its publish: its row, held for it, is swept
/// up by a relay once the hold passes, and its message goes out once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_its_stage_never_published_is_swept_once_its_hold_passes() {
    use hermes_bus::Stage;
    use hermes_runtime::relay::eager::HOLD;
    use hermes_testkit::drain;
    use hermes_types::ids::MessageId;

    let env = TestEnv::new().await;
    let db = env.db();
    let bus = env.bus().await;
    let run = RunId::new();
    let msg = Outgoing::from_envelope(&Envelope::new(run, None, &api_inbound("held, then lost")));
    {
        // What the stage's commit wrote; the stage then died before publishing.
        let mut c = db.get().await.unwrap();
        let tx = c.transaction().await.unwrap();
        let rows = hermes_db::outbox::record_processed(
            &tx,
            "ingest-test",
            MessageId::new(),
            std::slice::from_ref(&msg),
            Some(HOLD),
        )
        .await
        .unwrap();
        assert!(rows.is_some());
        tx.commit().await.unwrap();
    }
    // Another process's relay sweeps it up, once its hold has passed; its router routes it.
    let fleet = env.start(&[Service::Router]).await;
    routed(&db, run, Duration::from_secs(30)).await;
    let c = db.get().await.unwrap();
    let (unpublished, late): (i64, bool) = {
        let row = c
            .query_one(
                "SELECT count(*) FILTER (WHERE published_at IS NULL),
                        bool_and(published_at >= held_until)
                 FROM outbox WHERE message_id = $1",
                &[&msg.message_id.as_uuid()],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(unpublished, 0);
    assert!(late, "the relay left the row alone while it was held");
    eventually(Duration::from_secs(15), "the sweep counted", || async {
        (published(&fleet, "swept").await? >= 1.0).then_some(())
    })
    .await;
    assert_eq!(published(&fleet, "swept").await, Some(1.0), "swept once");
    fleet.stop().await.unwrap();
    // The router handled it once: one message on (to the model, or a failure reply).
    let mut next = drain(&bus, Stage::Llm).await;
    next.extend(drain(&bus, Stage::Delivery).await);
    assert_eq!(next.iter().filter(|e| e.run_id == run).count(), 1);
    bus.close().await;
}
