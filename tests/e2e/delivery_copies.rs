//! Two copies of one reply at work at the same moment (the relay and an eager publish both
//! placed it, or a redelivery while the first copy still sends) reach the chat once: a copy
//! takes the reply's send lease first, and the other waits for it and then skips what was
//! sent. The record is in PostgreSQL, so a replica killed half-way through a reply while
//! Redis forgets everything costs at most the one part that was in flight (docs/channels.md,
//! delivery).

use std::time::Duration;

use hermes::Service;
use hermes_bus::Outgoing;
use hermes_testkit::{TestEnv, answered, count, eventually, telegram_ok, telegram_send_message};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{Platform, ReplyTo};
use serde_json::json;
use wiremock::MockServer;
use wiremock::matchers::body_partial_json;

const TG_TOKEN: &str = "123456:copies-bot-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_copies_of_a_reply_processed_together_send_it_once() {
    let api = MockServer::start().await;
    // A slow platform: the first copy is still sending when the second looks.
    telegram_send_message(TG_TOKEN)
        .respond_with(telegram_ok().set_delay(Duration::from_millis(1500)))
        .mount(&api)
        .await;
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .set("TELEGRAM_API_BASE_URL", &api.uri())
        .set("HERMES_PREFETCH", "8");
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;
    let reply = answered(ReplyTo::chat(Platform::Telegram, "4242"), "once, please");
    let env_msg = Envelope::new(RunId::new(), None, &reply);
    // The same envelope twice, back to back: both are in flight together (prefetch 8).
    let copy = Outgoing::from_envelope(&env_msg);
    for _ in 0..2 {
        bus.publish_outgoing(&copy).await.unwrap();
    }
    let db = env.db();
    eventually(Duration::from_secs(30), "both copies handled", || async {
        let n = count(
            &db,
            "SELECT count(*) FROM processed_messages WHERE message_id = $1",
            &[&env_msg.id.as_uuid()],
        )
        .await;
        let (ready, _) = bus
            .queue_stats(&bus.names().queue(hermes_bus::Stage::Delivery))
            .await
            .ok()?;
        (n == 1 && ready == 0).then_some(())
    })
    .await;
    // Both copies are done when the queue is empty and nothing is unacked: wait for the
    // second copy's acknowledgement through the metrics.
    eventually(Duration::from_secs(30), "the second copy acked", || async {
        let m = fleet.metrics().await;
        let acked: f64 = ["acked", "duplicate"]
            .iter()
            .filter_map(|o| {
                hermes_testkit::metric(
                    &m,
                    &format!(
                        "hermes_bus_messages_total{{outcome=\"{o}\",queue=\"{}\"}}",
                        bus.names().queue(hermes_bus::Stage::Delivery)
                    ),
                )
            })
            .sum();
        (acked >= 2.0).then_some(())
    })
    .await;
    let sends = api.received_requests().await.unwrap().len();
    assert_eq!(sends, 1, "the reply reached the chat {sends} times");
    bus.close().await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_half_way_through_a_reply_while_redis_forgets_sends_only_the_rest() {
    let paragraphs: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|w| format!("{w}{}.", " word".repeat(599)))
        .collect();
    let api = MockServer::start().await;
    // The second part's first send hangs: the replica is killed while it waits.
    telegram_send_message(TG_TOKEN)
        .and(body_partial_json(json!({"text": paragraphs[1]})))
        .respond_with(telegram_ok().set_delay(Duration::from_secs(120)))
        .up_to_n_times(1)
        .mount(&api)
        .await;
    telegram_send_message(TG_TOKEN)
        .respond_with(telegram_ok())
        .mount(&api)
        .await;
    let mut env = TestEnv::new().await;
    env.set("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        .set("TELEGRAM_API_BASE_URL", &api.uri())
        .set("HERMES_DELIVERY_CHAT_BURST", "5");
    let first = env.start_killable(&[Service::Delivery]).await;
    let bus = env.bus().await;
    let reply = answered(
        ReplyTo::chat(Platform::Telegram, "4343"),
        &paragraphs.join("\n\n"),
    );
    bus.publish(&Envelope::new(RunId::new(), None, &reply))
        .await
        .unwrap();
    let texts = || async {
        api.received_requests()
            .await
            .unwrap()
            .iter()
            .map(|r| serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["text"].clone())
            .collect::<Vec<_>>()
    };
    let sent = |all: &[serde_json::Value], p: &str| all.iter().filter(|t| *t == p).count();
    eventually(
        Duration::from_secs(30),
        "the second part on its way",
        || async { (sent(&texts().await, &paragraphs[1]) == 1).then_some(()) },
    )
    .await;
    first.kill();
    // Redis restarted without persistence, as far as this namespace is concerned.
    let redis = redis::Client::open(env.vars["REDIS_URL"].as_str()).unwrap();
    let mut c = redis.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{}:*", env.ns))
        .query_async(&mut c)
        .await
        .unwrap();
    for key in keys {
        let _: () = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut c)
            .await
            .unwrap();
    }
    let second = env.start(&[Service::Delivery]).await;
    let all = eventually(Duration::from_secs(60), "the last part", || async {
        let all = texts().await;
        (sent(&all, &paragraphs[2]) == 1).then_some(all)
    })
    .await;
    assert_eq!(
        sent(&all, &paragraphs[0]),
        1,
        "the first part is not sent again"
    );
    assert_eq!(
        sent(&all, &paragraphs[1]),
        2,
        "the part in flight when the replica died is sent again (its fate was unknown)"
    );
    bus.close().await;
    second.stop().await.unwrap();
}
