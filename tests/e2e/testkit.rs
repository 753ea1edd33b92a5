//! The test kit's own promises: a dropped test environment leaves nothing on the shared
//! servers.

use hermes_bus::Stage;
use std::time::Duration;

use hermes_testkit::{TestEnv, count, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_test_env_deletes_its_queues_and_its_database() {
    let env = TestEnv::new().await;
    let observer = TestEnv::new().await;
    let bus = env.bus().await;
    let queue = bus.names().queue(Stage::Router);
    let db_name = env.db_name.clone();
    assert!(bus.queue_stats(&queue).await.is_ok(), "the topology exists");
    bus.close().await;
    drop(env);

    let other = observer.bus().await;
    assert!(
        other.queue_stats(&queue).await.is_err(),
        "{queue} is left on the broker"
    );
    let databases = count(
        &observer.db(),
        "SELECT count(*) FROM pg_database WHERE datname = $1",
        &[&db_name],
    )
    .await;
    assert_eq!(databases, 0, "{db_name} is left on the server");
    other.close().await;
}

/// A killed fleet must look to the servers like a killed pod: its consumers leave the broker
/// (so what it held is redelivered) without it running any shutdown path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_fleet_leaves_the_broker_like_a_killed_process() {
    let env = TestEnv::new().await;
    let bus = env.bus().await;
    let queue = bus.names().queue(Stage::Router);
    let fleet = env.start_killable(&[hermes::Service::Router]).await;
    eventually(Duration::from_secs(30), "the fleet consumes", || async {
        let (_, consumers) = bus.queue_stats(&queue).await.ok()?;
        (consumers == 1).then_some(())
    })
    .await;
    fleet.kill();
    eventually(
        Duration::from_secs(30),
        "the killed fleet's consumer is gone",
        || async {
            let (_, consumers) = bus.queue_stats(&queue).await.ok()?;
            (consumers == 0).then_some(())
        },
    )
    .await;
    bus.close().await;
}
