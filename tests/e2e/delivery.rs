//! Delivery: queued retries through the wait queues, parking with a failure reason,
//! channel senders against wiremock platform APIs, the shared breaker and the rate gate.

use std::time::Duration;

use hermes::Service;
use hermes_e2e::{TestEnv, eventually};
use hermes_shared::bus::{Bus, Stage};
use hermes_shared::envelope::Envelope;
use hermes_shared::ids::RunId;
use hermes_shared::model::{Outcome, Platform, Reply, ReplyTo, Usage};
use hermes_shared::stage::{FAILURE_DETAIL_HEADER, FAILURE_REASON_HEADER};
use lapin::options::{BasicAckOptions, BasicGetOptions};
use lapin::types::AMQPValue;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A reply envelope answering `text` to `chat_id` on `platform`.
fn reply(platform: Platform, chat_id: &str, callback_url: Option<String>, text: &str) -> Envelope {
    let to = ReplyTo {
        platform,
        chat_id: chat_id.into(),
        callback_url,
    };
    let reply = Reply {
        reply_to: to,
        outcome: Outcome::Answered {
            text: text.into(),
            model: "mock".into(),
            usage: Usage::default(),
            finish_reason: "stop".into(),
            tools_used: Vec::new(),
        },
        exchange: None,
    };
    Envelope::new(RunId::new(), None, &reply)
}

/// A message taken from a parking queue, with its failure headers.
struct Parked {
    env: Envelope,
    reason: Option<String>,
    detail: Option<String>,
}

fn header(h: &lapin::types::FieldTable, name: &str) -> Option<String> {
    match h.inner().get(name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        _ => None,
    }
}

/// Take every message of `stage`'s parking queue (acking them).
async fn take_parked(bus: &Bus, stage: Stage) -> Vec<Parked> {
    let ch = bus.channel().await.expect("channel");
    let mut out = Vec::new();
    while let Some(m) = ch
        .basic_get(
            bus.names().parking(stage).into(),
            BasicGetOptions::default(),
        )
        .await
        .expect("basic.get")
    {
        let headers = m.delivery.properties.headers().clone().unwrap_or_default();
        out.push(Parked {
            env: Envelope::from_slice(&m.delivery.data).expect("envelope"),
            reason: header(&headers, FAILURE_REASON_HEADER),
            detail: header(&headers, FAILURE_DETAIL_HEADER),
        });
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .expect("ack");
    }
    out
}

/// Wait until `stage`'s parking queue holds a message and take it.
async fn parked_one(bus: &Bus, stage: Stage, within: Duration) -> Parked {
    eventually(within, "a parked message", || async {
        take_parked(bus, stage).await.into_iter().next()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_callback_waits_through_the_schedule_then_is_parked_with_its_reason() {
    let peer = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/down"))
        .respond_with(ResponseTemplate::new(503))
        .mount(&peer)
        .await;
    Mock::given(method("POST"))
        .and(path("/refuses"))
        .respond_with(ResponseTemplate::new(400))
        .mount(&peer)
        .await;
    let mut env = TestEnv::new().await;
    env.set("HERMES_DELIVERY_RETRY_DELAYS", "1,2");
    let fleet = env.start(&[Service::Delivery]).await;
    let bus = env.bus().await;

    // A peer that keeps failing: first try, then after 1 s and 2 s, then parked.
    let down = reply(
        Platform::Rest,
        "u1",
        Some(format!("{}/down", peer.uri())),
        "hi",
    );
    bus.publish(&down).await.unwrap();
    let parked = parked_one(&bus, Stage::Delivery, Duration::from_secs(30)).await;
    assert_eq!(parked.env.id, down.id, "the same message, same id");
    assert_eq!(parked.env.attempt, 2, "both queued retries were used");
    assert_eq!(parked.reason.as_deref(), Some("service_unavailable"));
    assert!(parked.detail.unwrap().contains("503"));
    let tries = peer.received_requests().await.unwrap().len();
    assert_eq!(tries, 3, "one try per attempt");

    // A permanent refusal is parked at once, never retried.
    let refused = reply(
        Platform::Rest,
        "u1",
        Some(format!("{}/refuses", peer.uri())),
        "hi",
    );
    bus.publish(&refused).await.unwrap();
    let parked = parked_one(&bus, Stage::Delivery, Duration::from_secs(10)).await;
    assert_eq!(parked.env.id, refused.id);
    assert_eq!(parked.env.attempt, 0);
    assert_eq!(parked.reason.as_deref(), Some("invalid_recipient"));

    let metrics = fleet.metrics().await;
    assert!(
        metrics.contains("hermes_delivery_retries_total{delay=\"1s\",stage=\"delivery\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("hermes_delivery_retries_total{delay=\"2s\",stage=\"delivery\"} 1"),
        "{metrics}"
    );
    fleet.stop().await.unwrap();
    env.cleanup().await;
}
