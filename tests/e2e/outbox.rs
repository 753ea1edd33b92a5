//! The outbox relay publishes what a crash left behind.

use std::time::Duration;

use hermes::Service;
use hermes_bus::Outgoing;
use hermes_testkit::{TestEnv, api_inbound, eventually};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;

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
    eventually(
        Duration::from_secs(15),
        "the run created from the swept row",
        || async {
            let c = db.get().await.ok()?;
            let row = c
                .query_opt(
                    "SELECT status FROM agent_runs WHERE id = $1",
                    &[&run.as_uuid()],
                )
                .await
                .ok()??;
            Some(row.get::<_, String>(0))
        },
    )
    .await;
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
