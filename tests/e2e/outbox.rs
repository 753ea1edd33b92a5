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
