//! A dependency that is down is not the message's fault (docs/architecture.md, poison and
//! outages): while PostgreSQL is unreachable a stage holds its messages unacked instead of
//! requeueing them into their delivery limit, and processes them once it is back.

use std::time::Duration;

use hermes::Service;
use hermes_bus::Stage;
use hermes_db::Db;
use hermes_testkit::{Server, TestEnv, count, eventually, metric, send};
use hermes_types::model::Platform;
use secrecy::SecretString;

const HELD: &str = "hermes_stage_held_messages{dependency=\"postgres\",stage=\"router\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_held_while_postgres_is_away_and_routed_once_it_is_back() {
    let mut env = TestEnv::new().await;
    env.user(Platform::Rest, "patient", 5).await;
    let truth = env.direct_db();
    let pg = env.behind_proxy(Server::Postgres).await;
    let fleet = env.start(&[Service::Router]).await;
    let bus = env.bus().await;
    let queue = bus.names().queue(Stage::Router);
    let requeued = format!("hermes_bus_messages_total{{outcome=\"requeued\",queue=\"{queue}\"}}");

    pg.set_down(true);
    let run = send(&bus, "patient", "are you there?").await;
    eventually(Duration::from_secs(30), "the message is held", || async {
        let m = fleet.metrics().await;
        (metric(&m, HELD) == Some(1.0)).then_some(())
    })
    .await;
    let m = fleet.metrics().await;
    assert_eq!(
        metric(&m, "hermes_dependency_up{dependency=\"postgres\"}"),
        Some(0.0)
    );
    assert_eq!(
        metric(&m, &requeued).unwrap_or(0.0),
        0.0,
        "a held message spends no delivery"
    );

    pg.set_down(false);
    eventually(Duration::from_secs(30), "the run is routed", || async {
        let n = count(
            &truth,
            "SELECT count(*) FROM agent_runs WHERE id = $1",
            &[&run.as_uuid()],
        )
        .await;
        (n == 1).then_some(())
    })
    .await;
    let m = fleet.metrics().await;
    assert_eq!(metric(&m, HELD), Some(0.0));
    assert_eq!(metric(&m, &requeued).unwrap_or(0.0), 0.0);
    assert_eq!(
        metric(
            &m,
            "hermes_dependency_outages_total{dependency=\"postgres\"}"
        ),
        Some(1.0)
    );
    let (parked, _) = bus
        .queue_stats(&bus.names().parking(Stage::Router))
        .await
        .unwrap();
    assert_eq!(parked, 0);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_is_an_outage_and_a_broken_statement_is_not() {
    let env = TestEnv::new().await;
    let client = env.direct_db().get().await.unwrap();
    let constraint = client
        .execute(
            "INSERT INTO workspaces (slug, name) VALUES ('default', 'again')",
            &[],
        )
        .await
        .map_err(hermes_db::DbError::from)
        .expect_err("the default workspace exists");
    assert!(!constraint.is_unavailable(), "{constraint}");
    let syntax = client
        .execute("SELEC 1", &[])
        .await
        .map_err(hermes_db::DbError::from)
        .unwrap_err();
    assert!(!syntax.is_unavailable(), "{syntax}");

    let port = hermes_testkit::free_port();
    let nowhere = Db::new(
        &SecretString::from(format!("postgres://postgres@127.0.0.1:{port}/postgres")),
        2,
    )
    .unwrap();
    let Err(refused) = nowhere.get().await else {
        panic!("nothing listens there")
    };
    assert!(refused.is_unavailable(), "{refused}");
}

/// A broker that stops taking messages without closing anything (a memory or disk alarm
/// blocks publishers) fails a publish after HERMES_PUBLISH_TIMEOUT_SECS instead of hanging
/// ingest and the relay with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_to_a_stalled_broker_fails_within_its_bound() {
    let mut env = TestEnv::new().await;
    let proxy = env.broker_behind_proxy().await;
    env.set("HERMES_PUBLISH_TIMEOUT_SECS", "1");
    let bus = env.bus().await;
    send(&bus, "before", "the broker takes this").await;
    proxy.set_stalled(true);
    let msg = hermes_types::envelope::Envelope::new(
        hermes_types::ids::RunId::new(),
        None,
        &hermes_testkit::api_inbound("stalled"),
    );
    // Bounded here too, so a hang fails the test instead of stalling the suite.
    let result = tokio::time::timeout(Duration::from_secs(30), bus.publish(&msg))
        .await
        .expect("the publish returned");
    assert!(
        matches!(result, Err(hermes_bus::BusError::PublishTimeout(_))),
        "{result:?}"
    );
    proxy.set_stalled(false);
}

/// An inspection of a stalled broker (the queue sampler's, `/health/detailed`'s) gives up within
/// the publish bound instead of waiting for ever, and never holds the connection it used: the
/// supervisor must still be able to drop it and reconnect, or exit past its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inspection_of_a_stalled_broker_gives_up_and_holds_nothing() {
    let mut env = TestEnv::new().await;
    let proxy = env.broker_behind_proxy().await;
    env.set("HERMES_PUBLISH_TIMEOUT_SECS", "1");
    let bus = env.bus().await;
    let queue = bus.names().queue(Stage::Router);
    proxy.set_stalled(true);
    let result = tokio::time::timeout(Duration::from_secs(30), bus.queue_stats(&queue))
        .await
        .expect("the inspection returned");
    assert!(
        matches!(result, Err(hermes_bus::BusError::NoAnswer { .. })),
        "{result:?}"
    );
    tokio::time::timeout(Duration::from_secs(30), bus.close())
        .await
        .expect("the stalled connections are dropped within their bound");
    proxy.set_stalled(false);
}
