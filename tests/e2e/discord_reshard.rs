//! The Discord Gateway connector's Identify turns and re-sharding (docs/channels.md, "The
//! Gateway connector"): one Identify per bucket every 5 s across replicas, and a new
//! recommended shard count started beside the old one, which closes once every new shard is up.

use std::time::Duration;

use hermes_discord_gateway::discover::Starts;
use hermes_discord_gateway::identify::{IdentifyGate, Turn};
use hermes_discord_gateway::protocol::Shard;
use hermes_runtime::Ctx;
use hermes_telemetry::Metrics;
use hermes_testkit::{FakeGateway, count, discord_recommends, eventually};
use serde_json::json;

use crate::discord_gateway::{BOT, fleet_services, message, sent_in, setup};

/// Two replicas' gates share each bucket's turn through PostgreSQL: the second asking in a
/// bucket within 5 s of the first waits for what is left of them, another bucket goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_identify_per_bucket_goes_at_a_time_across_replicas() {
    let env = hermes_testkit::TestEnv::new().await;
    let gate = || async {
        let ctx = Ctx::without_broker(env.config(), Metrics::new())
            .await
            .expect("PostgreSQL is reachable");
        let metrics = ctx.metrics.discord_gateway.clone();
        IdentifyGate::new(ctx, 2, None, metrics)
    };
    let (first, second) = (gate().await, gate().await);
    assert_eq!(first.turn(0).await.unwrap(), Turn::Go);
    match second.turn(0).await.unwrap() {
        Turn::Wait(left) => assert!(left <= Duration::from_secs(5), "{left:?}"),
        Turn::Go => panic!("two Identifies in one bucket within 5 s"),
    }
    assert_eq!(second.turn(1).await.unwrap(), Turn::Go);
}

/// Discord's count of session starts is counted down by each Identify; once spent, the next
/// waits for the window's reset and counts from the window's total again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_starts_are_counted_down_and_a_spent_count_waits_for_its_reset() {
    let env = hermes_testkit::TestEnv::new().await;
    let ctx = Ctx::without_broker(env.config(), Metrics::new())
        .await
        .expect("PostgreSQL is reachable");
    let metrics = ctx.metrics.discord_gateway.clone();
    // One start left, and a window that has already reset.
    let starts = Starts {
        total: 10,
        remaining: 1,
        reset_after: Duration::ZERO,
    };
    let gate = IdentifyGate::new(ctx, 2, Some(starts), metrics.clone());
    assert_eq!(metrics.session_starts_remaining.get(), 1);
    // Two shards in buckets of their own, so neither waits for the other's turn.
    let shard = |id| Shard::new(id, 2).unwrap();
    gate.wait(shard(0)).await;
    assert_eq!(metrics.session_starts_remaining.get(), 0);
    gate.wait(shard(1)).await;
    assert_eq!(metrics.session_starts_remaining.get(), 9);
}

/// Discord recommends two shards where there was one, and two Identifies at a time: both new
/// shards identify (in buckets of their own) beside the old session, which closes (and hands its lease back) once both are up; messages on the
/// new shards are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_recommended_shard_count_starts_beside_the_old_and_replaces_it() {
    let gateway = FakeGateway::start().await;
    let (mut env, _model, api) = setup(&gateway).await;
    env.set("DISCORD_RESHARD_CHECK_SECS", "1");
    let fleet = env.start(&fleet_services()).await;
    let mut old = gateway.connection().await;
    assert_eq!(old.hello_and_identify().await["shard"], json!([0, 1]));
    old.ready("sess-old", gateway.url(), BOT);

    discord_recommends(&api, gateway.url(), 2, 2).await;
    // Each new shard connects once its Identify turn comes (5 s apart in one bucket).
    let mut shards = Vec::new();
    let mut new = Vec::new();
    for session in ["sess-a", "sess-b"] {
        let mut conn = gateway.connection().await;
        shards.push(conn.hello_and_identify().await["shard"].clone());
        conn.ready(session, gateway.url(), BOT);
        new.push(conn);
    }
    shards.sort_by_key(|s| s[0].as_u64());
    assert_eq!(shards, vec![json!([0, 2]), json!([1, 2])]);
    // Discord's new `max_concurrency` of 2 was taken: shard 1 identified in a bucket of its own.
    let db = env.db();
    let bucket_1 = "SELECT count(*) FROM leases WHERE name = 'discord-identify-1'";
    assert_eq!(count(&db, bucket_1, &[]).await, 1);

    // Both up: the old session closes as a session that ends (1000), its lease handed back.
    assert_eq!(old.closed().await, Some(1000));
    let old_lease = "SELECT count(*) FROM leases WHERE name = 'discord-shard-0/1'";
    eventually(
        Duration::from_secs(10),
        "the old lease handed back",
        || async { (count(&db, old_lease, &[]).await == 0).then_some(()) },
    )
    .await;
    let metrics = eventually(Duration::from_secs(10), "the re-shard counted", || async {
        let m = fleet.metrics().await;
        m.contains("hermes_discord_gateway_reshards_total 1")
            .then_some(m)
    })
    .await;
    assert!(
        metrics.contains("hermes_discord_gateway_shards 2"),
        "{metrics}"
    );

    // A direct message on a new shard is answered.
    new[0].dispatch(
        "MESSAGE_CREATE",
        message("2001", "4401", None, "What is a river?", false),
    );
    let calls = sent_in(&api, "4401", 1).await;
    assert_eq!(calls[0].body["content"], "A river is water.");
}
