//! The job scheduler keeps each due time to one run (docs/architecture.md, the job
//! scheduler): two fleets on one database and namespace share a job due every second, two
//! schedulers driven through the same due times claim each once, a job that missed a day
//! while the fleet was away runs once, a revoked key's jobs (or a key's without the `jobs`
//! scope) do not run, and no job runs sooner than `HERMES_JOB_MIN_INTERVAL_SECS` after the
//! last.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, SubsecRound, TimeDelta, Utc};
use hermes::Service;
use hermes_db::Db;
use hermes_db::api_keys::KeyScope;
use hermes_runtime::Ctx;
use hermes_telemetry::Metrics;
use hermes_testkit::{KEY, TestEnv, eventually};
use serde_json::json;
use tokio::sync::Barrier;

use crate::jobs::{call, create_job};

/// How many runs the job has had, and over how many distinct due times.
async fn runs_and_due_times(db: &Db, job: &str) -> (i64, i64) {
    let c = db.get().await.unwrap();
    let row = c
        .query_one(
            "SELECT count(*), count(DISTINCT due_at) FROM job_runs WHERE job_id = $1::text::uuid",
            &[&job],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// Move the job's next due time to `at` (the clock the tests drive).
async fn set_due(db: &Db, job: &str, at: DateTime<Utc>) {
    db.get()
        .await
        .unwrap()
        .execute(
            "UPDATE jobs SET next_run_at = $2 WHERE id = $1::text::uuid",
            &[&job, &at],
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_fleets_run_a_job_due_every_second_once_per_due_time() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_JOB_MIN_INTERVAL_SECS", "1");
    let db = env.db();
    // Two whole fleets on one database and namespace: two schedulers, two of every stage.
    let one = env.start(&Service::ALL).await;
    let two = env.start(&Service::ALL).await;
    let job = json!({"name": "tick", "prompt": "tick", "schedule": {"every_seconds": 1}});
    let id = create_job(&one, KEY, job).await;
    let route = format!("/api/jobs/{id}");

    // Twelve due times pass (however long the fleets take to claim them), then the job is
    // paused from the other fleet. Each is a race between the two schedulers.
    eventually(Duration::from_secs(90), "twelve due times", || async {
        (runs_and_due_times(&db, &id).await.0 >= 12).then_some(())
    })
    .await;
    let (status, _) = call(&two, "POST", &format!("{route}/pause"), KEY, None).await;
    assert_eq!(status, 200);

    let c = db.get().await.unwrap();
    let row = c
        .query_one(
            "SELECT min(due_at), max(due_at) FROM job_runs WHERE job_id = $1::text::uuid",
            &[&id],
        )
        .await
        .unwrap();
    let (first, last): (DateTime<Utc>, DateTime<Utc>) = (row.get(0), row.get(1));
    let due_times = (last - first).num_seconds() + 1;
    let (runs, distinct) = runs_and_due_times(&db, &id).await;
    assert_eq!(distinct, runs, "a due time ran twice");
    assert_eq!(
        runs, due_times,
        "{runs} runs for {due_times} due times from {first} to {last}"
    );
    assert!(runs >= 12);
    // Every run went through the pipeline once, and was answered.
    let done = eventually(Duration::from_secs(60), "every run answered", || async {
        let c = db.get().await.ok()?;
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM agent_runs r JOIN job_runs j ON j.run_id = r.id
                 WHERE j.job_id = $1::text::uuid AND r.status = 'completed'",
                &[&id],
            )
            .await
            .ok()?
            .get(0);
        (n == runs).then_some(n)
    })
    .await;
    let all: i64 = c
        .query_one(
            "SELECT count(*) FROM agent_runs WHERE metadata->>'job_id' = $1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(all, done, "no run beyond the due times");
    one.stop().await.unwrap();
    two.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_schedulers_driven_through_thirty_due_times_claim_each_once() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_JOB_MIN_INTERVAL_SECS", "1");
    let db = env.db();
    // Ingest only, to create the job; the two schedulers below are the only ones.
    let fleet = env.start(&[Service::Ingest]).await;
    let job = json!({"name": "tick", "prompt": "tick", "schedule": {"every_seconds": 1}});
    let id = create_job(&fleet, KEY, job).await;
    let t0: DateTime<Utc> = "2030-01-01T00:00:00Z".parse().unwrap();
    set_due(&db, &id, t0).await;

    let a = Ctx::without_broker(env.config(), Metrics::new())
        .await
        .unwrap();
    let b = Ctx::without_broker(env.config(), Metrics::new())
        .await
        .unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let drive = |ctx: Ctx, barrier: Arc<Barrier>| async move {
        let mut claimed = 0;
        for second in 0..30 {
            // Both schedulers tick at the same moment of the driven clock.
            barrier.wait().await;
            let now = t0 + TimeDelta::milliseconds(second * 1000 + 500);
            claimed += hermes_router::scheduler::tick(&ctx, now).await.unwrap();
        }
        claimed
    };
    let (ca, cb) = tokio::join!(
        tokio::spawn(drive(a, barrier.clone())),
        tokio::spawn(drive(b, barrier))
    );
    let (ca, cb) = (ca.unwrap(), cb.unwrap());
    assert_eq!(ca + cb, 30, "claims: {ca} + {cb}");
    assert_eq!(runs_and_due_times(&db, &id).await, (30, 30));
    let queued: i64 = db
        .get()
        .await
        .unwrap()
        .query_one("SELECT count(*) FROM outbox WHERE stage = 'router'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(queued, 30, "one inbound message per run");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_missed_a_day_runs_once() {
    let env = TestEnv::new().await;
    let db = env.db();
    // Created with ingest alone, then set a day overdue: as if the fleet had been away.
    let ingest = env.start(&[Service::Ingest]).await;
    let job = json!({"name": "hourly", "prompt": "hourly", "schedule": {"every_seconds": 3600}});
    let id = create_job(&ingest, KEY, job).await;
    let overdue = (Utc::now() - TimeDelta::days(1)).trunc_subsecs(0);
    set_due(&db, &id, overdue).await;
    ingest.stop().await.unwrap();

    let fleet = env.start(&Service::ALL).await;
    let next: DateTime<Utc> = eventually(Duration::from_secs(20), "the missed run", || async {
        let c = db.get().await.ok()?;
        let row = c
            .query_one(
                "SELECT next_run_at FROM jobs WHERE id = $1::text::uuid",
                &[&id],
            )
            .await
            .ok()?;
        let next: DateTime<Utc> = row.get(0);
        (next > overdue).then_some(next)
    })
    .await;
    // 24 due times were missed; one ran, and the next is to come, in step with them.
    assert_eq!(runs_and_due_times(&db, &id).await, (1, 1));
    assert!(next > Utc::now());
    assert_eq!((next - overdue).num_seconds() % 3600, 0);
    let (_, got) = eventually(Duration::from_secs(20), "the run answered", || async {
        let v = call(&fleet, "GET", &format!("/api/jobs/{id}"), KEY, None).await;
        (v.1["last_run"]["status"] == "completed").then_some(v)
    })
    .await;
    assert_eq!(got["last_run"]["output"], "echo: hourly");
    let due: DateTime<Utc> = got["last_run"]["due_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(due, overdue, "the run is the missed due time's");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_keys_jobs_are_not_run_nor_counted_due() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_JOB_MIN_INTERVAL_SECS", "1");
    let db = env.db();
    let key = crate::jobs::jobs_key(&env, None).await;
    let ingest = env.start(&[Service::Ingest]).await;
    let job = json!({"name": "k", "prompt": "k", "schedule": {"every_seconds": 1}});
    let id = create_job(&ingest, &key.secret_key, job).await;
    let t0: DateTime<Utc> = "2030-01-01T00:00:00Z".parse().unwrap();
    set_due(&db, &id, t0).await;
    let ctx = Ctx::without_broker(env.config(), Metrics::new())
        .await
        .unwrap();
    let client = db.get().await.unwrap();
    assert_eq!(
        hermes_db::jobs::claim::count_due(&client, t0)
            .await
            .unwrap(),
        1
    );

    hermes_db::api_keys::revoke(&client, key.key.id)
        .await
        .unwrap();
    assert_eq!(
        hermes_db::jobs::claim::count_due(&client, t0)
            .await
            .unwrap(),
        0
    );
    assert_eq!(hermes_router::scheduler::tick(&ctx, t0).await.unwrap(), 0);
    assert_eq!(runs_and_due_times(&db, &id).await, (0, 0));
    ingest.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_jobs_run_only_while_it_holds_the_jobs_scope() {
    let env = TestEnv::new().await;
    let db = env.db();
    let key = crate::jobs::jobs_key(&env, None).await;
    let ingest = env.start(&[Service::Ingest]).await;
    let job = json!({"name": "k", "prompt": "k", "schedule": {"every_seconds": 3600}});
    let id = create_job(&ingest, &key.secret_key, job).await;
    let t0: DateTime<Utc> = "2030-01-01T00:00:00Z".parse().unwrap();
    set_due(&db, &id, t0).await;
    let ctx = Ctx::without_broker(env.config(), Metrics::new())
        .await
        .unwrap();
    let client = db.get().await.unwrap();
    let set_scopes = |scopes: &'static [KeyScope]| {
        let db = db.clone();
        let id = key.key.id;
        async move {
            let c = db.get().await.unwrap();
            assert!(
                hermes_db::api_keys::set_scopes(&c, id, scopes)
                    .await
                    .unwrap()
            );
        }
    };

    // The key keeps its jobs but loses the scope: nothing is claimed or counted due.
    set_scopes(&[KeyScope::Chat]).await;
    let due = hermes_db::jobs::claim::count_due(&client, t0)
        .await
        .unwrap();
    assert_eq!(due, 0);
    assert_eq!(hermes_router::scheduler::tick(&ctx, t0).await.unwrap(), 0);
    assert_eq!(runs_and_due_times(&db, &id).await, (0, 0));
    // The scope back, the job runs (once for the time it missed).
    set_scopes(&[KeyScope::Chat, KeyScope::Jobs]).await;
    assert_eq!(hermes_router::scheduler::tick(&ctx, t0).await.unwrap(), 1);
    assert_eq!(runs_and_due_times(&db, &id).await, (1, 1));
    ingest.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_never_runs_a_job_sooner_than_the_minimum_interval() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_JOB_MIN_INTERVAL_SECS", "60");
    let db = env.db();
    let ingest = env.start(&[Service::Ingest]).await;
    let job = json!({"name": "m", "prompt": "m", "schedule": {"every_seconds": 60}});
    let id = create_job(&ingest, KEY, job).await;
    // A schedule stored before the limit (or written past the API): every second.
    db.get()
        .await
        .unwrap()
        .execute(
            "UPDATE jobs SET schedule = '{\"every_seconds\": 1}' WHERE id = $1::text::uuid",
            &[&id],
        )
        .await
        .unwrap();
    let t0: DateTime<Utc> = "2030-01-01T00:00:00Z".parse().unwrap();
    set_due(&db, &id, t0).await;
    let ctx = Ctx::without_broker(env.config(), Metrics::new())
        .await
        .unwrap();
    let next = || async {
        let c = db.get().await.unwrap();
        c.query_one(
            "SELECT next_run_at FROM jobs WHERE id = $1::text::uuid",
            &[&id],
        )
        .await
        .unwrap()
        .get::<_, DateTime<Utc>>(0)
    };
    assert_eq!(hermes_router::scheduler::tick(&ctx, t0).await.unwrap(), 1);
    assert_eq!(next().await, t0 + TimeDelta::seconds(60));
    // Driven through the next minute second by second: nothing more is due.
    for second in 1..60 {
        let now = t0 + TimeDelta::seconds(second);
        assert_eq!(hermes_router::scheduler::tick(&ctx, now).await.unwrap(), 0);
    }
    let now = t0 + TimeDelta::seconds(60);
    assert_eq!(hermes_router::scheduler::tick(&ctx, now).await.unwrap(), 1);
    assert_eq!(runs_and_due_times(&db, &id).await, (2, 2));
    ingest.stop().await.unwrap();
}
