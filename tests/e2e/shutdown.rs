//! Stopping a consumer hands nothing back that is still being worked on: the messages in
//! flight finish and are acked on the channel they came on (docs/architecture.md, graceful
//! shutdown), so no other replica gets them while they still run here.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use hermes_bus::Stage;
use hermes_testkit::{KEY, TestEnv, eventually, send};
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_consumer_keeps_its_channel_until_the_message_in_flight_is_acked() {
    let env = TestEnv::new().await;
    let bus = env.bus().await;
    let observer = env.bus().await;
    let queue = bus.names().queue(Stage::Router);
    send(&bus, "u1", "in flight during a stop").await;

    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let stop = CancellationToken::new();
    let consumer = {
        let (bus, stop) = (bus.clone(), stop.clone());
        let (started, release) = (started.clone(), release.clone());
        tokio::spawn(async move {
            bus.consume(Stage::Router, 1, stop, move |delivery| {
                let (started, release) = (started.clone(), release.clone());
                async move {
                    started.notify_one();
                    release.notified().await;
                    let sent = delivery.acker.ack(BasicAckOptions::default()).await;
                    assert!(sent.expect("ack sent"), "the ack reached the channel");
                }
            })
            .await
        })
    };
    started.notified().await;
    // A second replica consumes the same queue.
    let channel = observer.channel().await.unwrap();
    channel
        .basic_qos(1, BasicQosOptions::default())
        .await
        .unwrap();
    let mut replica = channel
        .basic_consume(
            queue.clone().into(),
            "replica".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    stop.cancel();
    // While the first consumer still works on the message, the replica must not get it
    // (before the fix it arrived within milliseconds of the stop). A correct consumer never
    // fails this, however slow the machine.
    let redelivered = tokio::time::timeout(Duration::from_secs(2), replica.next()).await;
    assert!(
        redelivered.is_err(),
        "the message in flight was handed to another replica during the stop"
    );
    release.notify_one();
    consumer.await.unwrap();
    // The consumer closed its channel after the ack, so the broker has processed it.
    let (ready, _) = observer.queue_stats(&queue).await.unwrap();
    assert_eq!(
        ready, 0,
        "the message went back to the queue instead of being acked"
    );
    let _ = channel.close(200, "done".into()).await;
    bus.close().await;
    observer.close().await;
}

/// What is still running when the grace ends is stopped and handed back to its queue, not
/// cut off after the connections closed nor left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_still_running_when_the_grace_ends_is_handed_back_to_its_queue() {
    let provider = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(
            wiremock::ResponseTemplate::new(200)
                .set_delay(Duration::from_secs(60))
                .set_body_json(hermes_testkit::openai_answer("too late", 1, 2)),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri())
        .set("HERMES_SHUTDOWN_GRACE_SECS", "1");
    env.user(hermes_types::model::Platform::Rest, "anyone", 5)
        .await;
    let fleet = env
        .start(&[hermes::Service::Router, hermes::Service::Llm])
        .await;
    let bus = env.bus().await;
    send(&bus, "anyone", "take forever").await;
    eventually(Duration::from_secs(30), "the model call", || async {
        (!provider.received_requests().await?.is_empty()).then_some(())
    })
    .await;
    fleet.stop().await.unwrap();
    // The quorum queue applies the closed channel's return a moment after the connection
    // closed: wait for it (under load it lags), then require exactly this state.
    let queue = bus.names().queue(Stage::Llm);
    eventually(
        Duration::from_secs(15),
        "the model call's message back in its queue",
        || async { (bus.queue_stats(&queue).await.ok()? == (1, 0)).then_some(()) },
    )
    .await;
    let replies = hermes_testkit::count(
        &env.db(),
        "SELECT count(*) FROM outbox WHERE stage = 'delivery'",
        &[],
    )
    .await;
    assert_eq!(replies, 0, "nothing was committed for it");
    bus.close().await;
}

/// An ingest-only process (ingest's own Deployment) has nothing else to drain on SIGTERM, so
/// the callers it holds get the whole grace for their answers, not the third that ingest gets
/// beside stages in one process: an answer that comes after that third still reaches its
/// caller before the process exits. `hermes bench faults --fault sigterm` found streams cut
/// here (docs/faults.md). The process is real: in-process, an aborted server's connections
/// would outlive it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ingest_only_process_holds_its_callers_for_the_whole_grace() {
    // The answer comes 4 s after the call: later than a third of the 10 s grace, sooner
    // than all of it.
    let provider = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(
            wiremock::ResponseTemplate::new(200)
                .set_delay(Duration::from_secs(4))
                .set_body_json(hermes_testkit::openai_answer("worth the wait", 1, 3)),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri())
        .set("HERMES_SHUTDOWN_GRACE_SECS", "10");
    let stages = env
        .start(&[
            hermes::Service::Router,
            hermes::Service::Llm,
            hermes::Service::Delivery,
        ])
        .await;
    let mut ingest = env.spawn_ready("ingest").await;
    let call = tokio::spawn(
        reqwest::Client::new()
            .post(ingest.url("/v1/chat/completions"))
            .bearer_auth(KEY)
            .json(&json!({"messages": [{"role": "user", "content": "take your time"}]}))
            .send(),
    );
    eventually(Duration::from_secs(30), "the model call", || async {
        (!provider.received_requests().await?.is_empty()).then_some(())
    })
    .await;
    ingest.terminate();
    let response = call
        .await
        .unwrap()
        .expect("the caller is answered before ingest exits");
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"], "worth the wait",
        "{body}"
    );
    let status = tokio::time::timeout(Duration::from_secs(20), ingest.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "clean exit after SIGTERM, got {status}");
    stages.stop().await.unwrap();
}
