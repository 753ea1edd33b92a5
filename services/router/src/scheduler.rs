//! The job scheduler (docs/architecture.md, the job scheduler): every router replica runs
//! one, and none is special. Each tick claims the due jobs in PostgreSQL (`FOR NO KEY
//! UPDATE SKIP LOCKED`: replicas share them, none takes a row another holds), moves each
//! job's next due time past now (a job that missed several times while the fleet was away
//! runs once), and queues the run's inbound message in the outbox, all in one transaction:
//! a crash before the commit leaves the job due for the next tick, a crash after it leaves
//! the message for the outbox relay. Either way the due time runs once. A job never runs
//! sooner than `HERMES_JOB_MIN_INTERVAL_SECS` after its previous due time, whatever its
//! stored schedule says (a schedule written before the limit, or past the API).

use std::time::Duration;

use chrono::{DateTime, Utc};
use hermes_db::jobs::claim::{self, RunOf};
use hermes_runtime::Ctx;
use hermes_types::model::JobTrigger;

use crate::periodic;

/// How often a replica looks for due jobs: the most a job starts late, plus the outbox
/// relay's hop (docs/api.md, jobs).
pub const TICK: Duration = Duration::from_secs(1);

/// Jobs claimed per transaction (the next round takes the rest at once).
const BATCH: i64 = 100;

/// Claim and queue due jobs until `ctx.stop`.
pub async fn run(ctx: Ctx) {
    let mut every = periodic::ticker(TICK);
    while periodic::next(&ctx, &mut every).await {
        periodic::drain("job scheduling", BATCH, || tick(&ctx, Utc::now())).await;
        if let Ok(client) = ctx.db.get().await
            && let Ok(due) = claim::count_due(&client, Utc::now()).await
        {
            ctx.metrics.process.jobs_due.set(due);
        }
    }
}

/// One round at `now`: claim the jobs due, advance them and queue their runs, in one
/// transaction. Returns how many jobs it claimed. `now` is a parameter so that tests can
/// drive the clock.
pub async fn tick(ctx: &Ctx, now: DateTime<Utc>) -> anyhow::Result<usize> {
    let mut client = ctx.db.get().await?;
    let tx = client.transaction().await?;
    let due = claim::claim_due(&tx, now, BATCH).await?;
    let min_interval = chrono::TimeDelta::from_std(ctx.config.tenants.job_min_interval)
        .unwrap_or(chrono::TimeDelta::MAX);
    let mut moves = Vec::with_capacity(due.len());
    let mut runs = Vec::with_capacity(due.len());
    for d in &due {
        // Claimed jobs are unpaused, so they have a due time.
        let Some(due_at) = d.job.next_run_at else {
            continue;
        };
        let next = match d.job.spec.schedule.next_after(due_at, now) {
            Ok(next) => Some(
                due_at
                    .checked_add_signed(min_interval)
                    .map_or(next, |soonest| next.max(soonest)),
            ),
            Err(why) => {
                tracing::warn!(job_id = %d.job.id, why, "job has no time to come: paused");
                None
            }
        };
        moves.push((d.job.id, next));
        runs.push(RunOf {
            job: &d.job,
            callback_url: d.callback_url.as_deref(),
            trigger: JobTrigger::Schedule,
            due_at,
        });
    }
    claim::advance(&tx, &moves).await?;
    let queued = claim::enqueue_runs(&tx, &runs).await?;
    let lags: Vec<Duration> = runs
        .iter()
        .zip(&queued)
        .filter(|(_, id)| id.is_some())
        .map(|(r, _)| (now - r.due_at).to_std().unwrap_or_default())
        .collect();
    tx.commit().await?;
    for lag in &lags {
        ctx.metrics
            .process
            .jobs_claim_lag
            .observe(lag.as_secs_f64());
        ctx.metrics
            .process
            .jobs_runs
            .with_label_values(&[JobTrigger::Schedule.as_str()])
            .inc();
    }
    Ok(due.len())
}
