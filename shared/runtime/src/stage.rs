//! The consume → process → commit → ack loop every queue-driven stage shares
//! (docs/architecture.md, "1. Nothing accepted is lost" to "4. Poison is parked, never looped").
//!
//! For each delivery: decode the envelope (garbage is parked at once), skip it if this
//! consumer already processed its id, run the handler's slow work outside any transaction
//! (`prepare`), then in one transaction record the id, apply the handler's effects and
//! write its next messages to the outbox (`commit`); only then ack. A transient failure
//! requeues (the queue's delivery limit parks a message that keeps failing); a poison
//! message is rejected straight to its parking queue. A failed send to a peer outside the
//! fleet ([`StageError::Retry`]) waits in the stage's next wait queue and comes back with
//! the same id and `attempt + 1`; when the schedule is used up, or the failure is permanent,
//! it is parked with its failure reason in the headers (`retry.rs`). Either way the new copy
//! is confirmed by the broker before the original is acked, so nothing is lost in between.
//! A parked message's handler is told ([`Handler::on_parked`], `park.rs`): what the message
//! leaves open (its run, its caller) is the stage's business, not the loop's.
//!
//! A stage may group its commits ([`run_grouped`], `group_commit.rs`): the transaction is
//! then shared with the other messages ready at the same moment, and redone per message
//! when any of them cannot commit.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions, BasicRejectOptions};
use tracing::Instrument;

use crate::context::Ctx;
use crate::outages::Dependency;
use crate::relay::eager;
use hermes_bus::{Outgoing, Stage, delay_label, delivery_count};
use hermes_db::{Transaction, outbox};
use hermes_net::failure::FailureReason;
use hermes_telemetry::trace::untraced;
use hermes_types::envelope::Envelope;

mod group_commit;
mod park;
mod retry;
mod traced;

use group_commit::Committers;
pub use group_commit::GroupCommit;
#[doc(hidden)]
#[cfg(feature = "testing")]
pub use group_commit::hold_for_burst;
pub use park::ParkCause;

/// The AMQP header naming why a parked message failed (a [`FailureReason`]).
pub const FAILURE_REASON_HEADER: &str = "x-hermes-failure-reason";
/// The AMQP header with the last error of a parked message, credentials scrubbed.
pub const FAILURE_DETAIL_HEADER: &str = "x-hermes-failure-detail";

/// Why a stage could not process a message.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// Worth retrying (a failure of this message that may pass): the message is requeued
    /// after a pause, and the queue's delivery limit parks it if it keeps failing.
    #[error("transient: {0:#}")]
    Transient(anyhow::Error),
    /// A dependency is down, which is not the message's fault: the message is held unacked
    /// (spending none of its delivery budget) until the dependency is back, then processed
    /// again (`outages.rs`).
    #[error("{dependency} unavailable: {error:#}")]
    Unavailable {
        dependency: Dependency,
        error: anyhow::Error,
    },
    /// Will never succeed (malformed payload): the message is parked now.
    #[error("poison: {0:#}")]
    Poison(anyhow::Error),
    /// Already handled (a redelivery, or the same platform message under another id): the
    /// transaction is rolled back and the message acked.
    #[error("duplicate: {0}")]
    Duplicate(&'static str),
    /// A send to a peer outside the fleet failed: try again after the next delay of the
    /// retry schedule, or park the message with `reason` (schedule used up, or permanent).
    #[error("{reason}: {error:#}")]
    Retry {
        reason: FailureReason,
        error: anyhow::Error,
    },
}

impl From<hermes_db::DbError> for StageError {
    fn from(e: hermes_db::DbError) -> Self {
        if e.is_concurrent_copy() {
            return StageError::Duplicate("a copy processed at the same time committed first");
        }
        if e.is_unavailable() {
            StageError::Unavailable {
                dependency: Dependency::Postgres,
                error: e.into(),
            }
        } else {
            StageError::Transient(e.into())
        }
    }
}

impl From<hermes_types::envelope::EnvelopeError> for StageError {
    fn from(e: hermes_types::envelope::EnvelopeError) -> Self {
        StageError::Poison(e.into())
    }
}

/// One stage's business logic, split around the transaction.
pub trait Handler: Send + Sync + 'static {
    /// The queue this handler consumes.
    const STAGE: Stage;
    /// What `prepare` hands to `commit`.
    type Prepared: Send;
    /// What `commit` hands to `after_commit`.
    type After: Send;
    /// Look the message up in `processed_messages` before `prepare`. Worth its round trip
    /// where `prepare` is slow or costly (model and tool calls, callbacks); a stage whose
    /// `prepare` is only reads can skip it, since the commit records the id anyway and a
    /// duplicate's transaction is rolled back there.
    const PRECHECK_DUPLICATES: bool = true;

    /// Slow work outside any transaction (model and tool calls). Skipped for duplicates.
    fn prepare(
        &self,
        env: &Envelope,
    ) -> impl Future<Output = Result<Self::Prepared, StageError>> + Send;

    /// Effects inside the transaction; returns the messages to emit via the outbox.
    fn commit(
        &self,
        env: &Envelope,
        prepared: Self::Prepared,
        tx: &Transaction<'_>,
    ) -> impl Future<Output = Result<(Vec<Envelope>, Self::After), StageError>> + Send;

    /// Told once a message's commit found it a duplicate (`StageError::Duplicate`), after any
    /// group retry: the final word on it, e.g. to count it once.
    fn on_duplicate(&self, env: &Envelope, why: &'static str) {
        let _ = (env, why);
    }

    /// Side effects that must follow the commit (telling a waiting caller). Runs before
    /// the ack; best effort, because the truth is already committed.
    fn after_commit(&self, env: &Envelope, after: Self::After) -> impl Future<Output = ()> + Send {
        let _ = (env, after);
        async {}
    }

    /// Told once `env` is parked (not an undecodable message: it has no envelope), before
    /// the original is acked or rejected: whatever the message leaves open is the stage's to
    /// end (`park.rs`). Returns messages for the stage loop to publish, with confirms. Best
    /// effort: the message is parked either way, and an error is only logged.
    fn on_parked(
        &self,
        env: &Envelope,
        cause: ParkCause,
    ) -> impl Future<Output = anyhow::Result<Vec<Envelope>>> + Send {
        let _ = (env, cause);
        async { Ok(Vec::new()) }
    }
}

enum Disposition {
    Ack(&'static str),
    Requeue,
    Reject,
    /// Keep the message unacked until `Dependency` is back, then process it again.
    Hold(Dependency),
}

/// How a message's commit reaches its transaction.
enum Commit<H: Handler> {
    /// Its own transaction.
    Alone,
    /// A transaction shared with whichever other messages are ready ([`run_grouped`]).
    Grouped(Committers<H>),
}

impl<H: Handler> Clone for Commit<H> {
    fn clone(&self) -> Self {
        match self {
            Commit::Alone => Commit::Alone,
            Commit::Grouped(c) => Commit::Grouped(c.clone()),
        }
    }
}

/// Consume `H::STAGE`'s queue until `ctx.stop`, finishing in-flight messages before returning.
/// Each message commits in its own transaction.
pub async fn run<H: Handler>(ctx: Ctx, handler: H) {
    // Boxed: the consumer loop's future is large, and services hold several of them.
    Box::pin(consume(ctx, Arc::new(handler), Commit::Alone)).await;
}

/// As [`run`], but messages ready at the same moment commit together in one transaction
/// (up to `HERMES_COMMIT_GROUP` of them): fewer transactions for the same work, with each
/// message still acked only after its effects committed. See [`GroupCommit`].
pub async fn run_grouped<H: GroupCommit>(ctx: Ctx, handler: H) {
    let handler = Arc::new(handler);
    let group = ctx.config.bus.commit_group;
    if group <= 1 {
        return Box::pin(consume(ctx, handler, Commit::Alone)).await;
    }
    // A quarter of the pool commits; the rest serves `prepare`'s reads.
    let workers = (ctx.config.db_pool_size / 4).max(1);
    let (committers, mut workers) = group_commit::start(&ctx, handler.clone(), group, workers);
    Box::pin(consume(ctx, handler, Commit::Grouped(committers))).await;
    // Every handle is gone with the consumer: the committers finish what they hold and end.
    while workers.join_next().await.is_some() {}
}

async fn consume<H: Handler>(ctx: Ctx, handler: Arc<H>, commit: Commit<H>) {
    let queue = ctx.bus.names().queue(H::STAGE);
    // The failure series start at 0, so alerts and rate() see them before the first failure.
    let parking = ctx.bus.names().parking(H::STAGE);
    let bus_metrics = &ctx.metrics.bus;
    bus_metrics.parking_rejected.with_label_values(&[&parking]);
    if H::STAGE.retries_later() {
        for delay in &ctx.config.bus.retry_delays {
            let labels = [H::STAGE.as_str(), &delay_label(*delay)];
            bus_metrics.retries.with_label_values(&labels);
        }
    }
    let prefetch = ctx.config.bus.prefetch;
    let stop = ctx.stop.clone();
    let bus = ctx.bus.clone();
    // One shared context for every delivery instead of a clone of each of its handles.
    let ctx = Arc::new(ctx);
    bus.consume(H::STAGE, prefetch, stop, move |delivery| {
        let ctx = ctx.clone();
        let handler = handler.clone();
        let queue = queue.clone();
        let commit = commit.clone();
        async move { process(&ctx, handler.as_ref(), &commit, &queue, delivery).await }
    })
    .await;
}

async fn process<H: Handler>(
    ctx: &Ctx,
    handler: &H,
    commit: &Commit<H>,
    queue: &str,
    delivery: Delivery,
) {
    let started = Instant::now();
    let stage = H::STAGE.as_str();
    let mut consumer = None;
    let (disposition, run_id) = match Envelope::from_slice(&delivery.data) {
        Err(e) => {
            tracing::error!(queue, error = %e, "undecodable message; parking it");
            (Disposition::Reject, None)
        }
        Ok(mut env) => {
            let deliveries = delivery_count(&delivery);
            let spans = traced::spans(H::STAGE, queue, &mut env, deliveries);
            consumer = Some(spans.consumer.clone());
            let run_id = env.run_id;
            let handled = handle_held(ctx, handler, commit, &env, deliveries);
            let d = untraced(spans.dropped, handled)
                .instrument(spans.consumer)
                .instrument(spans.log)
                .await;
            (d, Some(run_id))
        }
    };
    let outcome = match disposition {
        Disposition::Ack(outcome) => match delivery.acker.ack(BasicAckOptions::default()).await {
            Ok(true) => outcome,
            // The channel went away first: the broker redelivers the message, and the
            // idempotency record makes that copy a duplicate.
            Ok(false) => {
                tracing::warn!(
                    queue,
                    ?run_id,
                    "ack not sent (channel closed); the message will be redelivered"
                );
                "ack_lost"
            }
            Err(e) => {
                tracing::warn!(queue, ?run_id, error = %e, "ack failed; the message will be redelivered");
                "ack_lost"
            }
        },
        // `handle_held` resolves a hold itself; one left over is handed back like a requeue.
        Disposition::Requeue | Disposition::Hold(_) => {
            let _ = delivery
                .acker
                .nack(BasicNackOptions {
                    requeue: true,
                    multiple: false,
                })
                .await;
            "requeued"
        }
        Disposition::Reject => {
            let _ = delivery
                .acker
                .reject(BasicRejectOptions { requeue: false })
                .await;
            "rejected"
        }
    };
    if let Some(span) = consumer {
        traced::finish(&span, outcome, delivery.data.len());
    }
    let m = &ctx.metrics;
    m.bus.messages.with_label_values(&[queue, outcome]).inc();
    let secs = started.elapsed().as_secs_f64();
    m.stages.duration.with_label_values(&[stage]).observe(secs);
}

/// [`handle`], holding the message while a dependency it needs is down: it waits for the
/// dependency before it starts and after each outage, and goes back to the queue (handed
/// back, not failed) only if the stage stops meanwhile.
async fn handle_held<H: Handler>(
    ctx: &Ctx,
    handler: &H,
    commit: &Commit<H>,
    env: &Envelope,
    deliveries: u32,
) -> Disposition {
    loop {
        if !ctx.outages.is_up(Dependency::Postgres)
            && !hold(ctx, H::STAGE, Dependency::Postgres).await
        {
            return Disposition::Requeue;
        }
        match handle(ctx, handler, commit, env, deliveries).await {
            Disposition::Hold(dependency) => {
                if !hold(ctx, H::STAGE, dependency).await {
                    return Disposition::Requeue;
                }
            }
            other => return other,
        }
    }
}

/// Wait, counted as held, until `dependency` is up; `false` when the stage stops first.
async fn hold(ctx: &Ctx, stage: Stage, dependency: Dependency) -> bool {
    let held = ctx
        .metrics
        .stages
        .held_messages
        .with_label_values(&[stage.as_str(), dependency.as_str()]);
    held.inc();
    let up = ctx.outages.wait_up(dependency, &ctx.stop).await;
    held.dec();
    if !up {
        tracing::info!(%dependency, "stopping while the dependency is down: handing the message back");
    }
    up
}

async fn handle<H: Handler>(
    ctx: &Ctx,
    handler: &H,
    commit: &Commit<H>,
    env: &Envelope,
    deliveries: u32,
) -> Disposition {
    let consumer = H::STAGE.as_str();
    if H::PRECHECK_DUPLICATES {
        match ctx.db.get().await {
            Ok(client) => match hermes_db::already_processed(&client, consumer, env.id).await {
                Ok(true) => {
                    tracing::info!("duplicate message skipped");
                    return Disposition::Ack("duplicate");
                }
                Ok(false) => {}
                Err(e) => {
                    return dispose(ctx, handler, env, e.into(), deliveries, Phase::Prepare).await;
                }
            },
            Err(e) => {
                return dispose(ctx, handler, env, e.into(), deliveries, Phase::Prepare).await;
            }
        }
    }
    let prepared = match handler.prepare(env).await {
        Ok(p) => p,
        Err(e) => return dispose(ctx, handler, env, e, deliveries, Phase::Prepare).await,
    };
    let committed = match commit {
        Commit::Alone => {
            commit_alone(handler, env, prepared, ctx, consumer)
                .instrument(traced::commit_span(H::STAGE, false))
                .await
        }
        Commit::Grouped(committers) => {
            committers
                .commit(env, prepared)
                .instrument(traced::commit_span(H::STAGE, true))
                .await
        }
    };
    match committed {
        Ok(Some((after, rows))) => {
            // The next stages' messages go out now, from memory (docs/architecture.md#2-every-state-change-travels-with-its-message-the-outbox);
            // the caller is told meanwhile. Both follow the commit, and the ack follows both.
            tokio::join!(
                eager::publish(&ctx.db, &ctx.bus, &ctx.metrics, rows),
                handler.after_commit(env, after),
            );
            Disposition::Ack("acked")
        }
        Ok(None) => {
            tracing::info!("duplicate message skipped at commit");
            Disposition::Ack("duplicate")
        }
        // Alone or grouped, a commit's error maps like any other.
        Err(e) => dispose(ctx, handler, env, e, deliveries, Phase::Commit).await,
    }
}

/// Where a message's handling failed; only the log line differs.
#[derive(Clone, Copy)]
enum Phase {
    /// The duplicate check or `prepare`.
    Prepare,
    /// `commit`, in its own transaction or in a group's.
    Commit,
}

/// The one place a [`StageError`] becomes what happens to its message: a transient failure
/// is requeued after a pause, a duplicate acked, poison parked at once, and a failed send
/// to an outside peer scheduled for a later attempt or parked with its reason.
async fn dispose<H: Handler>(
    ctx: &Ctx,
    handler: &H,
    env: &Envelope,
    error: StageError,
    deliveries: u32,
    phase: Phase,
) -> Disposition {
    match error {
        // The broker parks a message past its delivery limit without telling anyone; on the
        // last delivery it allows (`x-delivery-count` = the limit) it is parked here instead,
        // so its stage is told (`park.rs`).
        e @ StageError::Transient(_) if deliveries >= ctx.config.bus.delivery_limit => {
            tracing::error!(error = %e, deliveries, "message failed on its own too often; parking it");
            park::tell(ctx, handler, env, ParkCause::DeliveryLimit).await;
            Disposition::Reject
        }
        e @ StageError::Transient(_) => transient(e, deliveries).await,
        StageError::Unavailable { dependency, error } => {
            tracing::warn!(%dependency, error = %format!("{error:#}"), "dependency unavailable; holding the message");
            ctx.outages.report_down(dependency);
            Disposition::Hold(dependency)
        }
        StageError::Duplicate(why) => {
            handler.on_duplicate(env, why);
            match phase {
                Phase::Prepare => tracing::info!(why, "duplicate message skipped"),
                Phase::Commit => tracing::info!(why, "duplicate message skipped at commit"),
            }
            Disposition::Ack("duplicate")
        }
        e @ StageError::Poison(_) => {
            tracing::error!(error = %e, "message cannot be processed; parking it");
            park::tell(ctx, handler, env, ParkCause::Poison).await;
            Disposition::Reject
        }
        StageError::Retry { reason, error } => {
            retry::later(ctx, handler, env, reason, &error).await
        }
    }
}

/// Requeue after a pause that grows with the delivery count, so a dependency outage does
/// not burn through the delivery limit in milliseconds.
async fn transient(e: StageError, deliveries: u32) -> Disposition {
    tracing::warn!(error = %e, deliveries, "processing failed; requeueing");
    let pause = Duration::from_millis(200u64.saturating_mul(1 << deliveries.min(5)));
    tokio::time::sleep(pause).await;
    Disposition::Requeue
}

/// A committed message: what `after_commit` gets, and the outbox rows it wrote beside their
/// ids, for the stage to publish itself (empty when this process runs no relay to mark them:
/// the relays then publish the rows).
pub(crate) type Committed<A> = (A, Vec<(i64, Outgoing)>);

/// One message's effects, idempotency record and outbox rows in a transaction of its own.
async fn commit_alone<H: Handler>(
    handler: &H,
    env: &Envelope,
    prepared: H::Prepared,
    ctx: &Ctx,
    consumer: &str,
) -> Result<Option<Committed<H::After>>, StageError> {
    let mut client = ctx.db.get().await?;
    let tx = client
        .transaction()
        .await
        .map_err(hermes_db::DbError::from)?;
    let Some(committed) =
        apply(handler, env, prepared, &tx, consumer, eager::hold(&ctx.db)).await?
    else {
        return Ok(None);
    };
    tx.commit().await.map_err(hermes_db::DbError::from)?;
    Ok(Some(committed))
}

/// Inside `tx`: the handler's effects, then the idempotency record and the outbox rows in
/// one statement, last, so a duplicate (a concurrent redelivery waits there for the first to
/// commit) is found after everything the handler wrote, which the caller then rolls back.
/// `None`: processed already. With `hold` the rows are the stage's to publish after the
/// commit, and come back with their ids.
async fn apply<H: Handler>(
    handler: &H,
    env: &Envelope,
    prepared: H::Prepared,
    tx: &Transaction<'_>,
    consumer: &str,
    hold: Option<Duration>,
) -> Result<Option<Committed<H::After>>, StageError> {
    let (next, after) = handler.commit(env, prepared, tx).await?;
    let outgoing: Vec<Outgoing> = next.iter().map(Outgoing::from_envelope).collect();
    let Some(ids) = outbox::record_processed(tx, consumer, env.id, &outgoing, hold).await? else {
        return Ok(None);
    };
    let rows = match hold {
        Some(_) => ids.into_iter().zip(outgoing).collect(),
        None => Vec::new(),
    };
    Ok(Some((after, rows)))
}
