//! Retention and erasure (`docs/security.md`): expired rows are swept in batches by the
//! router, the ledger is summarised and still adds up, and `hermes users erase` removes one
//! person from PostgreSQL and Redis and nobody else.

use std::time::Duration;

use hermes::Service;
use hermes_config::Retention;
use hermes_db::retention::{self, Table};
use hermes_db::{Db, credits};
use hermes_testkit::{TestEnv, count, eventually};
use hermes_types::ids::UserId;
use hermes_types::model::Platform;
use redis::AsyncCommands;

/// Thirty days for every family.
fn thirty_days() -> Retention {
    Retention {
        runs_days: 30,
        conversations_days: 30,
        statuses_days: 30,
        facts_days: 30,
        ledger_days: 30,
        responses_days: 30,
        forge_deliveries_days: 30,
        sweep_every: Duration::from_secs(1),
    }
}

/// A user linked to `sender` on Telegram with, all `age_days` old: a session and its
/// message, a closed run and a run of the sender from before the link, an event, a wake, a
/// delivery status, an extracted fact and an operator key, three grants, and a run still
/// open with its charge. The balance is 59.
async fn seed(env: &TestEnv, sender: &str, age_days: i32) -> UserId {
    let user = env.user(Platform::Telegram, sender, 0).await.id;
    let db = env.db();
    let client = db.get().await.unwrap();
    let session = uuid::Uuid::now_v7();
    let (run, before, open) = (
        uuid::Uuid::now_v7(),
        uuid::Uuid::now_v7(),
        uuid::Uuid::now_v7(),
    );
    let age = format!("now() - make_interval(days => {age_days})");
    client
        .batch_execute(&format!(
            "INSERT INTO agents (workspace_id, profile_key, kind, display_name)
               SELECT id, 'agent-{sender}', 'internal', 'A' FROM workspaces WHERE slug = 'default';
             INSERT INTO sessions (id, user_id, platform, channel_id, started_at, last_activity_at)
               VALUES ('{session}', '{user}', 'telegram', '{sender}', {age}, {age});
             INSERT INTO agent_runs (id, platform, sender_id, status, tier, user_id, session_id, created_at)
               VALUES ('{run}', 'telegram', '{sender}', 'completed', 'free', '{user}', '{session}', {age}),
                      ('{before}', 'telegram', '{sender}', 'failed', 'free', NULL, NULL, {age}),
                      ('{open}', 'telegram', '{sender}', 'routed', 'free', '{user}', '{session}', {age});
             INSERT INTO interactions (run_id, user_id, session_id, direction, text, created_at)
               VALUES ('{run}', '{user}', '{session}', 'inbound', 'hello', {age});
             INSERT INTO activity_events (run_id, user_id, kind, created_at)
               VALUES ('{run}', '{user}', 'run.completed', {age});
             INSERT INTO webhook_deliveries (id, run_id, agent_id, event, status, created_at)
               SELECT gen_random_uuid(), '{run}', id, 'wake', 'delivered', {age}
               FROM agents WHERE profile_key = 'agent-{sender}';
             INSERT INTO message_statuses (platform, platform_message_id, status, recipient_id, occurred_at, recorded_at)
               VALUES ('telegram', 'm-{run}', 'delivered', '{sender}', {age}, {age});
             INSERT INTO user_memory (user_id, key, value, structural, source, created_at, updated_at)
               VALUES ('{user}', 'fact', 'likes tea', false, 'extracted', {age}, {age}),
                      ('{user}', 'diet', 'vegan', true, 'operator', {age}, {age});
             INSERT INTO llm_token_usage (user_id, window_kind, starts, used)
               VALUES ('{user}', 'day', current_date, 42);
             INSERT INTO credit_ledger (user_id, run_id, reason, delta, balance_after, created_at)
               VALUES ('{user}', NULL, 'grant', 10, 10, {age}),
                      ('{user}', NULL, 'grant', 20, 30, {age}),
                      ('{user}', NULL, 'grant', 30, 60, {age}),
                      ('{user}', '{open}', 'charge', -1, 59, {age});
             UPDATE users SET credits = 59 WHERE id = '{user}';"
        ))
        .await
        .unwrap();
    user
}

async fn rows(db: &Db, table: &str, user: UserId) -> i64 {
    let column = if table == "users" { "id" } else { "user_id" };
    count(
        db,
        &format!("SELECT count(*) FROM {table} WHERE {column} = $1"),
        &[&user],
    )
    .await
}

async fn runs_of_sender(db: &Db, sender: &str) -> i64 {
    count(
        db,
        "SELECT count(*) FROM agent_runs WHERE sender_id = $1",
        &[&sender],
    )
    .await
}

/// What sweeping one seeded user removes, per table.
fn removed_for(users: u64) -> Vec<(Table, u64)> {
    let mut v = vec![
        (Table::AgentRuns, 2 * users),
        (Table::ActivityEvents, users),
        (Table::WebhookDeliveries, users),
        (Table::Interactions, users),
        (Table::Sessions, users),
        (Table::MessageStatuses, users),
        (Table::UserMemory, users),
        // Three grants folded into one summary.
        (Table::CreditLedger, 2 * users),
    ];
    v.sort();
    v
}

/// The old user lost what expired and kept the rest; the ledger adds up.
async fn assert_swept(db: &Db, old: UserId, old_sender: &str) {
    for (table, left) in [
        ("interactions", 0),
        ("sessions", 0),
        ("activity_events", 0),
        ("user_memory", 1),
        ("credit_ledger", 2),
        ("agent_runs", 1),
    ] {
        assert_eq!(rows(db, table, old).await, left, "{table} of the old user");
    }
    assert_eq!(
        runs_of_sender(db, old_sender).await,
        1,
        "only the open run stays"
    );
    let client = db.get().await.unwrap();
    let (balance, ledger) = credits::audit(&client, old).await.unwrap();
    assert_eq!((balance, ledger), (59, 59));
    let summary = client
        .query_one(
            "SELECT delta, balance_after FROM credit_ledger WHERE user_id = $1 AND reason = 'summary'",
            &[&old],
        )
        .await
        .unwrap();
    assert_eq!(
        (summary.get::<_, i64>(0), summary.get::<_, i64>(1)),
        (60, 60)
    );
    let charge = count(
        db,
        "SELECT count(*) FROM credit_ledger WHERE user_id = $1 AND reason = 'charge'",
        &[&old],
    )
    .await;
    assert_eq!(charge, 1, "an open run's charge is never folded");
}

/// The fresh user kept everything.
async fn assert_kept(db: &Db, fresh: UserId, fresh_sender: &str) {
    for (table, kept) in [
        ("interactions", 1),
        ("sessions", 1),
        ("activity_events", 1),
        ("user_memory", 2),
        ("credit_ledger", 4),
    ] {
        assert_eq!(
            rows(db, table, fresh).await,
            kept,
            "{table} of the fresh user"
        );
    }
    assert_eq!(runs_of_sender(db, fresh_sender).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_rows_are_swept_in_batches_and_the_ledger_still_adds_up() {
    let env = TestEnv::new().await;
    let old = seed(&env, "9001", 100).await;
    let old2 = seed(&env, "9002", 100).await;
    let fresh = seed(&env, "9003", 1).await;
    let db = env.db();
    // Batches of one: every table takes several.
    let mut swept = retention::sweep(&db, &thirty_days(), 1).await.unwrap();
    swept.removed.sort();
    assert_eq!(swept.removed, removed_for(2));
    assert!(!swept.yielded);
    assert_swept(&db, old, "9001").await;
    assert_swept(&db, old2, "9002").await;
    assert_kept(&db, fresh, "9003").await;
    // A second sweep finds nothing; a lone summary is not folded again.
    let again = retention::sweep(&db, &thirty_days(), 1).await.unwrap();
    assert_eq!(again.removed, vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sweepers_at_once_remove_every_expired_row_once() {
    let env = TestEnv::new().await;
    let mut olds = Vec::new();
    for i in 0..4 {
        let sender = format!("91{i}");
        olds.push((seed(&env, &sender, 100).await, sender));
    }
    let db = env.db();
    let settings = thirty_days();
    let (a, b) = tokio::join!(
        retention::sweep(&db, &settings, 2),
        retention::sweep(&db, &settings, 2)
    );
    let mut total: Vec<(Table, u64)> = Vec::new();
    for (table, n) in a.unwrap().removed.into_iter().chain(b.unwrap().removed) {
        match total.iter_mut().find(|(t, _)| *t == table) {
            Some((_, sum)) => *sum += n,
            None => total.push((table, n)),
        }
    }
    total.sort();
    assert_eq!(total, removed_for(4));
    for (user, sender) in &olds {
        assert_swept(&db, *user, sender).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_router_sweeps_on_its_own_and_counts_what_it_removed() {
    let mut env = TestEnv::new().await;
    for family in ["RUNS", "CONVERSATIONS", "STATUSES", "FACTS", "LEDGER"] {
        env.set(&format!("HERMES_RETENTION_{family}_DAYS"), "30");
    }
    // The seeded open run is 100 days old: the stuck-run sweeper must leave it open here.
    env.set("HERMES_RETENTION_SWEEP_SECS", "1")
        .set("HERMES_RUN_STUCK_AFTER_SECS", "1000000000");
    let old = seed(&env, "9201", 100).await;
    let fresh = seed(&env, "9202", 1).await;
    let fleet = env.start(&[Service::Router]).await;
    let db = env.db();
    eventually(Duration::from_secs(30), "the router's sweep", || async {
        (rows(&db, "interactions", old).await == 0 && rows(&db, "credit_ledger", old).await == 2)
            .then_some(())
    })
    .await;
    assert_swept(&db, old, "9201").await;
    assert_kept(&db, fresh, "9202").await;
    let metrics = fleet.metrics().await;
    for (table, n) in removed_for(1) {
        let line = format!(
            "hermes_retention_removed_total{{table=\"{}\"}} {n}",
            table.as_str()
        );
        assert!(metrics.contains(&line), "{line}\n{metrics}");
    }
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_erase_removes_a_person_everywhere_and_nobody_else() {
    let env = TestEnv::new().await;
    let gone = seed(&env, "9301", 1).await;
    let kept = seed(&env, "9302", 1).await;
    let config = env.config();
    let redis = redis::Client::open(env.vars["REDIS_URL"].as_str()).unwrap();
    let mut conn = redis.get_multiplexed_async_connection().await.unwrap();
    let ns = &env.ns;
    let keys_of = |user: UserId, sender: &str| {
        vec![
            format!("{ns}:soul:{user}:base"),
            format!("{ns}:llm:budget:{user}:d:2026-11-24"),
            format!("{ns}:session:telegram:channel:{sender}"),
            format!("{ns}:rl:in:telegram:{sender}"),
        ]
    };
    for key in keys_of(gone, "9301")
        .into_iter()
        .chain(keys_of(kept, "9302"))
    {
        let _: () = conn.set_ex(&key, "x", 600).await.unwrap();
    }
    // The event streams of each person's runs (three each, the sender's from before the
    // link among them), as a follower of their chat runs would have had them written.
    let db = env.db();
    let mut streams_of = std::collections::HashMap::new();
    for sender in ["9301", "9302"] {
        let runs: Vec<uuid::Uuid> = db
            .get()
            .await
            .unwrap()
            .query("SELECT id FROM agent_runs WHERE sender_id = $1", &[&sender])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(runs.len(), 3);
        let keys: Vec<String> = runs
            .iter()
            .map(|run| format!("{ns}:run:{run}:events"))
            .collect();
        for key in &keys {
            let _: String = conn
                .xadd(key, "*", &[("event", r#"{"type":"running","round":0}"#)])
                .await
                .unwrap();
        }
        streams_of.insert(sender, keys);
    }
    let exists = |keys: Vec<String>| {
        let mut conn = conn.clone();
        async move {
            let mut n = 0usize;
            for key in keys {
                let e: bool = conn.exists(&key).await.unwrap();
                n += usize::from(e);
            }
            n
        }
    };

    // Without --yes: counted, nothing removed.
    let mut out = Vec::new();
    hermes::cli::users::erase::run(&config, gone, false, &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("postgres agent_runs: 3 rows"), "{text}");
    assert!(text.contains("redis: 7 keys"), "{text}");
    assert!(text.contains("--yes"), "{text}");
    assert_eq!(rows(&db, "users", gone).await, 1);
    assert_eq!(exists(keys_of(gone, "9301")).await, 4);

    let mut out = Vec::new();
    hermes::cli::users::erase::run(&config, gone, true, &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("postgres interactions: 1 rows removed"),
        "{text}"
    );
    assert!(text.contains("redis: 7 keys removed"), "{text}");
    for table in [
        "users",
        "sessions",
        "interactions",
        "agent_runs",
        "activity_events",
        "user_memory",
        "credit_ledger",
        "llm_token_usage",
        "user_channels",
    ] {
        assert_eq!(
            rows(&db, table, gone).await,
            0,
            "{table} of the erased user"
        );
    }
    assert_eq!(
        runs_of_sender(&db, "9301").await,
        0,
        "the sender's runs before the link too"
    );
    let statuses = count(
        &db,
        "SELECT count(*) FROM message_statuses WHERE recipient_id = '9301'",
        &[],
    )
    .await;
    assert_eq!(statuses, 0);
    assert_eq!(exists(keys_of(gone, "9301")).await, 0);
    assert_eq!(
        exists(streams_of["9301"].clone()).await,
        0,
        "their runs' streams"
    );

    // The other person is untouched.
    assert_kept(&db, kept, "9302").await;
    assert_eq!(rows(&db, "users", kept).await, 1);
    assert_eq!(exists(keys_of(kept, "9302")).await, 4);
    assert_eq!(exists(streams_of["9302"].clone()).await, 3);

    let mut out = Vec::new();
    let again = hermes::cli::users::erase::run(&config, gone, true, &mut out).await;
    assert!(again.unwrap_err().to_string().contains("no user"));
}

/// A Forge delivery id is remembered `HERMES_RETENTION_FORGE_DELIVERIES_DAYS`, then swept:
/// long enough for every retry of a wake, not for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_delivery_ids_are_forgotten_after_their_days() {
    let env = TestEnv::new().await;
    let db = env.db();
    db.get()
        .await
        .unwrap()
        .batch_execute(
            "INSERT INTO forge_deliveries (delivery_id, profile_key, run_id, received_at)
               VALUES ('dlv_old', 'victor', gen_random_uuid(), now() - interval '8 days'),
                      ('dlv_new', 'victor', gen_random_uuid(), now() - interval '6 days')",
        )
        .await
        .unwrap();
    let week = Retention {
        forge_deliveries_days: 7,
        ..thirty_days()
    };
    let swept = retention::sweep(&db, &week, 10).await.unwrap();
    assert_eq!(swept.removed, vec![(Table::ForgeDeliveries, 1)]);
    let left = count(
        &db,
        "SELECT count(*) FROM forge_deliveries WHERE delivery_id = 'dlv_new'",
        &[],
    )
    .await;
    assert_eq!(left, 1);
    assert_eq!(
        count(&db, "SELECT count(*) FROM forge_deliveries", &[]).await,
        1
    );
}
