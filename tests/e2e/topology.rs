//! The retry wait queues have a length cap, and an install whose wait queues an older build
//! declared without it still starts (docs/operations.md, changing the bus on a live install).

use std::time::Duration;

use hermes_bus::{BusError, Names, Outgoing, Stage, wait_queue_args};
use hermes_config::Namespace;
use hermes_testkit::{TestEnv, api_inbound};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};

/// Declare `{ns}.delivery.retry.1s` as an older build did (no length cap), holding `n`
/// messages.
async fn old_wait_queue(env: &TestEnv, n: usize) -> String {
    let config = env.config();
    let names = Names::new(Namespace::parse(&env.ns).unwrap());
    let queue = names.wait(Stage::Delivery, Duration::from_secs(1));
    let mut args = wait_queue_args(&names, &config.bus, Stage::Delivery, Duration::from_secs(1));
    let mut inner = args.inner().clone();
    inner.remove("x-max-length");
    // Long enough that what it holds is still there when the fleet's bus starts.
    inner.insert("x-message-ttl".into(), AMQPValue::LongLongInt(600_000));
    args = FieldTable::from(inner);
    let conn = Connection::connect(&env.vars["AMQP_URL"], ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    // Each message confirmed before the connection closes: unconfirmed publishes may still
    // be in flight (or dropped with the connection) when the test counts the queue.
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    ch.queue_declare(
        queue.clone().into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        args,
    )
    .await
    .unwrap();
    for _ in 0..n {
        ch.basic_publish(
            "".into(),
            queue.clone().into(),
            BasicPublishOptions::default(),
            b"waiting",
            BasicProperties::default(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    let _ = conn.close(200, "done".into()).await;
    queue
}

fn message() -> Outgoing {
    Outgoing::from_envelope(&Envelope::new(RunId::new(), None, &api_inbound("wait")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_wait_queue_refuses_more() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_DELIVERY_RETRY_DELAYS", "600")
        .set("HERMES_WAIT_QUEUE_MAX_LENGTH", "2");
    let bus = env.bus().await;
    let queue = bus.names().wait(Stage::Delivery, Duration::from_secs(600));
    // A quorum queue notices it is over its cap on the enqueue that crosses it, so it may
    // hold one more than the cap; the publish after that is refused.
    let mut accepted = 0;
    let refused = loop {
        match bus.publish_to("", &queue, &queue, &message()).await {
            Ok(()) => accepted += 1,
            Err(e) => break e,
        }
        assert!(
            accepted <= 3,
            "the wait queue took {accepted} messages with a cap of 2"
        );
    };
    assert!(accepted >= 2, "refused below the cap after {accepted}");
    assert!(matches!(refused, BusError::Nacked { .. }), "{refused:?}");
    bus.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_queue_of_an_older_build_holding_messages_is_kept_as_it_is() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_DELIVERY_RETRY_DELAYS", "1")
        .set("HERMES_WAIT_QUEUE_MAX_LENGTH", "2");
    let queue = old_wait_queue(&env, 3).await;
    // Declaring over the old queue does not fail the start, and loses nothing.
    let bus = env.bus().await;
    let (waiting, _) = bus.queue_stats(&queue).await.unwrap();
    assert_eq!(waiting, 3, "nothing that waited is lost to the upgrade");
    bus.publish_to("", &queue, &queue, &message())
        .await
        .unwrap();
    bus.close().await;
}
