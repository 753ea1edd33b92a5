//! `hermes bench jobs`: the job scheduler's claim alone (docs/performance.md, jobs). In a
//! private database (dropped afterwards) it makes `--jobs` jobs due at the same moment,
//! lets `--schedulers` schedulers (as many router replicas) claim them at once, and reports
//! how fast they were queued, checking that each ran once. No broker is needed: the runs
//! stay in the outbox, which is what a scheduler's transaction writes.

use std::time::Instant;

use chrono::{SubsecRound, Utc};
use clap::Args;
use hermes_config::Config;
use hermes_db::scratch::ScratchDb;
use hermes_runtime::context::Ctx;
use hermes_telemetry::Metrics;

#[derive(Args, Debug)]
pub struct JobsBench {
    /// Jobs due at the same moment.
    #[arg(long, default_value_t = 10_000)]
    jobs: u32,
    /// Schedulers claiming them at once (router replicas).
    #[arg(long, default_value_t = 2)]
    schedulers: u32,
}

pub async fn jobs(mut config: Config, args: JobsBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.jobs > 0 && args.schedulers > 0,
        "--jobs and --schedulers must be above 0"
    );
    let scratch = ScratchDb::create(&config.database_url, "hermes_bench").await?;
    config.database_url = scratch.url.clone();
    let result = measure(&config, &scratch.db, &args).await;
    scratch.drop_now().await?;
    result
}

async fn measure(config: &Config, db: &hermes_db::Db, args: &JobsBench) -> anyhow::Result<()> {
    let due = Utc::now().trunc_subsecs(0);
    db.get()
        .await?
        .execute(
            "INSERT INTO jobs (id, name, prompt, schedule, target_kind, target, next_run_at)
             SELECT gen_random_uuid(), 'bench-' || g, 'tick', '{\"every_seconds\": 3600}',
                    'stored', '{\"type\": \"stored\"}', $2
             FROM generate_series(1, $1::int) g",
            &[&(args.jobs as i32), &due],
        )
        .await?;
    let mut schedulers = Vec::new();
    for _ in 0..args.schedulers {
        schedulers.push(Ctx::without_broker(config.clone(), Metrics::new()).await?);
    }
    let started = Instant::now();
    let claims: Vec<_> = schedulers
        .into_iter()
        .map(|ctx| {
            tokio::spawn(async move {
                let (mut claimed, mut rounds) = (0usize, 0u32);
                // Rounds at the same moment until nothing is left to claim.
                loop {
                    let n = hermes_router::scheduler::tick(&ctx, due).await?;
                    if n == 0 {
                        return anyhow::Ok((claimed, rounds));
                    }
                    claimed += n;
                    rounds += 1;
                }
            })
        })
        .collect();
    let mut per_scheduler = Vec::new();
    for c in claims {
        per_scheduler.push(c.await??);
    }
    let elapsed = started.elapsed();
    let c = db.get().await?;
    let runs: i64 = c
        .query_one("SELECT count(*) FROM job_runs", &[])
        .await?
        .get(0);
    let queued: i64 = c
        .query_one("SELECT count(*) FROM outbox", &[])
        .await?
        .get(0);
    let left: i64 = c
        .query_one("SELECT count(*) FROM jobs WHERE next_run_at <= $1", &[&due])
        .await?
        .get(0);
    let claimed: usize = per_scheduler.iter().map(|(n, _)| n).sum();
    println!(
        "{} jobs due at once, {} schedulers: queued in {:.2} s, {:.0} jobs/s",
        args.jobs,
        args.schedulers,
        elapsed.as_secs_f64(),
        args.jobs as f64 / elapsed.as_secs_f64()
    );
    for (i, (n, rounds)) in per_scheduler.iter().enumerate() {
        println!("  scheduler {i}: {n} jobs in {rounds} claims");
    }
    println!("  claimed {claimed}, job_runs {runs}, outbox rows {queued}, still due {left}");
    anyhow::ensure!(
        claimed as i64 == i64::from(args.jobs)
            && runs == claimed as i64
            && queued == runs
            && left == 0,
        "each due job must run exactly once"
    );
    Ok(())
}
