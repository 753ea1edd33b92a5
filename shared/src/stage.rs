//! The consume → process → commit → ack loop every queue-driven stage shares
//! (DESIGN §3.1–3.4).
//!
//! For each delivery: decode the envelope (garbage is parked at once), skip it if this
//! consumer already processed its id, run the handler's slow work outside any transaction
//! (`prepare`), then in one transaction record the id, apply the handler's effects and
//! write its next messages to the outbox (`commit`); only then ack. A transient failure
//! requeues (the queue's delivery limit parks a message that keeps failing); a poison
//! message is rejected straight to its parking queue.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lapin::message::Delivery;
use lapin::options::{BasicAckOptions, BasicNackOptions, BasicRejectOptions};
use tracing::Instrument;

use crate::bus::{Outgoing, Stage, delivery_count};
use crate::context::Ctx;
use crate::db::{self, Transaction, outbox};
use crate::envelope::Envelope;

/// Why a stage could not process a message.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// Worth retrying (a dependency is down): the message is requeued.
    #[error("transient: {0:#}")]
    Transient(anyhow::Error),
    /// Will never succeed (malformed payload): the message is parked now.
    #[error("poison: {0:#}")]
    Poison(anyhow::Error),
    /// Already handled (a redelivery, or the same platform message under another id): the
    /// transaction is rolled back and the message acked.
    #[error("duplicate: {0}")]
    Duplicate(&'static str),
}

impl From<db::DbError> for StageError {
    fn from(e: db::DbError) -> Self {
        StageError::Transient(e.into())
    }
}

impl From<crate::envelope::EnvelopeError> for StageError {
    fn from(e: crate::envelope::EnvelopeError) -> Self {
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

    /// Side effects that must follow the commit (telling a waiting caller). Runs before
    /// the ack; best effort, because the truth is already committed.
    fn after_commit(&self, env: &Envelope, after: Self::After) -> impl Future<Output = ()> + Send {
        let _ = (env, after);
        async {}
    }
}

enum Disposition {
    Ack(&'static str),
    Requeue,
    Reject,
}

/// Consume `H::STAGE`'s queue until `ctx.stop`, finishing in-flight messages before returning.
pub async fn run<H: Handler>(ctx: Ctx, handler: H) {
    let handler = Arc::new(handler);
    let queue = ctx.bus.names().queue(H::STAGE);
    let prefetch = ctx.config.bus.prefetch;
    let stop = ctx.stop.clone();
    let bus = ctx.bus.clone();
    bus.consume(H::STAGE, prefetch, stop, move |delivery| {
        let ctx = ctx.clone();
        let handler = handler.clone();
        let queue = queue.clone();
        async move { process(&ctx, handler.as_ref(), &queue, delivery).await }
    })
    .await;
}

async fn process<H: Handler>(ctx: &Ctx, handler: &H, queue: &str, delivery: Delivery) {
    let started = Instant::now();
    let stage = H::STAGE.as_str();
    let (disposition, run_id) = match Envelope::from_slice(&delivery.data) {
        Err(e) => {
            tracing::error!(queue, error = %e, "undecodable message; parking it");
            (Disposition::Reject, None)
        }
        Ok(env) => {
            let span = tracing::info_span!(
                "message",
                stage,
                run_id = %env.run_id,
                message_id = %env.id,
                trace_id = env.traceparent.as_ref().map(|t| t.trace_id().to_string()).unwrap_or_default(),
            );
            let run_id = env.run_id;
            let d = handle(ctx, handler, &env, delivery_count(&delivery))
                .instrument(span)
                .await;
            (d, Some(run_id))
        }
    };
    let outcome = match disposition {
        Disposition::Ack(outcome) => {
            if let Err(e) = delivery.acker.ack(BasicAckOptions::default()).await {
                tracing::warn!(queue, ?run_id, error = %e, "ack failed; the message will be redelivered");
            }
            outcome
        }
        Disposition::Requeue => {
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
    ctx.metrics
        .bus_messages
        .with_label_values(&[queue, outcome])
        .inc();
    ctx.metrics
        .stage_duration
        .with_label_values(&[stage])
        .observe(started.elapsed().as_secs_f64());
}

async fn handle<H: Handler>(
    ctx: &Ctx,
    handler: &H,
    env: &Envelope,
    deliveries: u32,
) -> Disposition {
    let consumer = H::STAGE.as_str();
    if H::PRECHECK_DUPLICATES {
        match ctx.db.get().await {
            Ok(client) => match db::already_processed(&client, consumer, env.id).await {
                Ok(true) => {
                    tracing::info!("duplicate message skipped");
                    return Disposition::Ack("duplicate");
                }
                Ok(false) => {}
                Err(e) => return transient(StageError::from(e), deliveries).await,
            },
            Err(e) => return transient(StageError::from(e), deliveries).await,
        }
    }
    let prepared = match handler.prepare(env).await {
        Ok(p) => p,
        Err(e @ StageError::Transient(_)) => return transient(e, deliveries).await,
        Err(StageError::Duplicate(why)) => {
            tracing::info!(why, "duplicate message skipped");
            return Disposition::Ack("duplicate");
        }
        Err(e @ StageError::Poison(_)) => {
            tracing::error!(error = %e, "message cannot be processed; parking it");
            return Disposition::Reject;
        }
    };
    match commit(handler, env, prepared, ctx, consumer).await {
        Ok(Some(after)) => {
            handler.after_commit(env, after).await;
            Disposition::Ack("acked")
        }
        Ok(None) => {
            tracing::info!("duplicate message skipped at commit");
            Disposition::Ack("duplicate")
        }
        Err(e @ StageError::Transient(_)) => transient(e, deliveries).await,
        Err(StageError::Duplicate(why)) => {
            tracing::info!(why, "duplicate message skipped at commit");
            Disposition::Ack("duplicate")
        }
        Err(e @ StageError::Poison(_)) => {
            tracing::error!(error = %e, "message cannot be processed; parking it");
            Disposition::Reject
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

async fn commit<H: Handler>(
    handler: &H,
    env: &Envelope,
    prepared: H::Prepared,
    ctx: &Ctx,
    consumer: &str,
) -> Result<Option<H::After>, StageError> {
    let mut client = ctx.db.get().await?;
    let tx = client.transaction().await.map_err(db::DbError::from)?;
    let (next, after) = handler.commit(env, prepared, &tx).await?;
    let outgoing: Vec<Outgoing> = next.iter().map(Outgoing::from_envelope).collect();
    // The idempotency record and the outbox rows in one statement, last: a duplicate (a
    // concurrent redelivery waits here for the first to commit) rolls back everything the
    // handler wrote when the transaction is dropped.
    let relay = ctx.db.local_relay();
    let local = relay.running();
    if !outbox::record_processed(&tx, consumer, env.id, &outgoing, local).await? {
        return Ok(None);
    }
    tx.commit().await.map_err(db::DbError::from)?;
    if local && !outgoing.is_empty() {
        relay.wake();
    }
    Ok(Some(after))
}
