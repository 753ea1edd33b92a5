//! Group commit: several messages' commits in one PostgreSQL transaction.
//!
//! A stage whose `prepare` is quick (the router) spends most of its database time on the
//! per-transaction work (BEGIN, COMMIT, a WAL flush each) rather than on its few statements.
//! Here each message's task hands its prepared work to a small set of committers; a
//! committer takes whatever is waiting (up to the group size, never waiting for more), runs
//! each message's `commit` and idempotency record in one transaction, commits once, and
//! answers every message. Nothing about a message's guarantees changes: it is acked only
//! after the transaction holding its effects committed.
//!
//! A group is all or nothing, so one message that cannot commit (a duplicate, a poison
//! payload, a deadlock) must not take the others with it: the group is rolled back and every
//! message is committed again on its own, exactly as without grouping. That is why the
//! prepared work must be `Clone` (a copy is kept for the redo), and why a group commits in
//! the order of each message's lock key: two groups then take row locks in the same order and
//! never deadlock each other.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Mutex, mpsc, oneshot};
use tokio::task::JoinSet;
use uuid::Uuid;

use super::{Committed, Handler, StageError, apply, commit_alone};
use crate::context::Ctx;
use hermes_types::envelope::Envelope;

/// A handler whose commits may share a transaction with other messages' commits.
pub trait GroupCommit: Handler<Prepared: Clone + Sync> {
    /// The key of the rows this message's commit locks first (for the router, the user), or
    /// `None` when it locks nothing shared. A group commits its messages in key order.
    fn lock_key(prepared: &Self::Prepared) -> Option<Uuid>;
}

/// What one message's task waits for: its commit's outcome (`None`: a duplicate), with the
/// rows it is to publish.
type Outcome<H> = Result<Option<Committed<<H as Handler>::After>>, StageError>;

struct Job<H: Handler> {
    env: Envelope,
    prepared: H::Prepared,
    done: oneshot::Sender<Outcome<H>>,
}

/// The message tasks' side: hands a prepared message to the committers.
pub(super) struct Committers<H: Handler> {
    queue: mpsc::Sender<Job<H>>,
}

impl<H: Handler> Clone for Committers<H> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<H: Handler> Committers<H> {
    /// Commit this message with whichever others are waiting; resolves once it committed.
    pub(super) async fn commit(&self, env: &Envelope, prepared: H::Prepared) -> Outcome<H> {
        let (done, outcome) = oneshot::channel();
        let job = Job {
            env: env.clone(),
            prepared,
            done,
        };
        if self.queue.send(job).await.is_err() {
            return Err(StageError::Transient(anyhow::anyhow!(
                "the stage's committers have stopped"
            )));
        }
        outcome.await.unwrap_or_else(|_| {
            Err(StageError::Transient(anyhow::anyhow!(
                "the committer stopped before answering"
            )))
        })
    }
}

/// Start `workers` committers taking up to `group` messages each. They stop once every
/// [`Committers`] handle is dropped and the queue is empty.
pub(super) fn start<H: GroupCommit>(
    ctx: &Ctx,
    handler: Arc<H>,
    group: usize,
    workers: usize,
) -> (Committers<H>, JoinSet<()>) {
    let (queue, rx) = mpsc::channel::<Job<H>>(group.max(1) * workers.max(1) * 2);
    let rx = Arc::new(Mutex::new(rx));
    let burst = Arc::new(AtomicUsize::new(held_burst(ctx.config.namespace.as_str())));
    let mut set = JoinSet::new();
    for _ in 0..workers.max(1) {
        let (ctx, handler, rx, burst) = (ctx.clone(), handler.clone(), rx.clone(), burst.clone());
        set.spawn(async move {
            while let Some(mut jobs) = take(&rx, group.max(1), &burst).await {
                // Only a held burst is longer than a group.
                while jobs.len() > group.max(1) {
                    let rest = jobs.split_off(group.max(1));
                    commit_group(&ctx, handler.as_ref(), jobs).await;
                    jobs = rest;
                }
                commit_group(&ctx, handler.as_ref(), jobs).await;
            }
        });
    }
    (Committers { queue }, set)
}

/// Bursts that tests asked the committers of a namespace to wait for ([`hold_for_burst`]).
#[cfg(feature = "testing")]
static HELD: std::sync::Mutex<Vec<(String, usize)>> = std::sync::Mutex::new(Vec::new());

/// Test hook: the committers started next in `namespace` take nothing until `messages`
/// messages wait, then commit those in full groups. A committer otherwise never waits to fill
/// a group (docs/architecture.md, "How a message travels"), so which messages share a
/// transaction depends on timing, and a test asserting on grouping needs it certain.
#[cfg(feature = "testing")]
pub fn hold_for_burst(namespace: &str, messages: usize) {
    if let Ok(mut held) = HELD.lock() {
        held.push((namespace.to_string(), messages));
    }
}

/// The burst held for `namespace` (0: none), consumed by the committers it was held for.
#[cfg(feature = "testing")]
fn held_burst(namespace: &str) -> usize {
    let Ok(mut held) = HELD.lock() else { return 0 };
    match held.iter().position(|(ns, _)| ns == namespace) {
        Some(i) => held.swap_remove(i).1,
        None => 0,
    }
}

/// Without the test hook no burst is ever held.
#[cfg(not(feature = "testing"))]
fn held_burst(_namespace: &str) -> usize {
    0
}

/// The next group: wait for one message, then take what else is already waiting (or, for a
/// held burst, wait for the whole burst).
async fn take<H: Handler>(
    rx: &Mutex<mpsc::Receiver<Job<H>>>,
    group: usize,
    burst: &AtomicUsize,
) -> Option<Vec<Job<H>>> {
    let mut rx = rx.lock().await;
    let first = rx.recv().await?;
    let mut jobs = vec![first];
    let burst = burst.swap(0, Ordering::Relaxed);
    while jobs.len() < burst {
        match rx.recv().await {
            Some(job) => jobs.push(job),
            None => break,
        }
    }
    while jobs.len() < group {
        match rx.try_recv() {
            Ok(job) => jobs.push(job),
            Err(_) => break,
        }
    }
    Some(jobs)
}

async fn commit_group<H: GroupCommit>(ctx: &Ctx, handler: &H, mut jobs: Vec<Job<H>>) {
    let stage = H::STAGE.as_str();
    ctx.metrics
        .stages
        .commit_batch_size
        .with_label_values(&[stage])
        .observe(jobs.len() as f64);
    if jobs.len() == 1 {
        let job = jobs.remove(0);
        let outcome = commit_alone(handler, &job.env, job.prepared, ctx, stage).await;
        let _ = job.done.send(outcome);
        return;
    }
    jobs.sort_by_key(|j| H::lock_key(&j.prepared));
    match try_group(ctx, handler, &jobs).await {
        Ok(committed) => {
            for (job, committed) in jobs.into_iter().zip(committed) {
                let _ = job.done.send(Ok(Some(committed)));
            }
        }
        Err(why) => {
            tracing::debug!(error = %why, messages = jobs.len(), "group commit rolled back; committing one at a time");
            ctx.metrics
                .stages
                .commit_batch_fallbacks
                .with_label_values(&[stage])
                .inc();
            for job in jobs {
                let outcome = commit_alone(handler, &job.env, job.prepared, ctx, stage).await;
                let _ = job.done.send(outcome);
            }
        }
    }
}

/// Every message of the group in one transaction; any message that would not commit as it
/// stands (an error, a duplicate) fails the whole group, which is then redone one by one.
/// Each message's task publishes its own rows, so the committer is free for the next group.
async fn try_group<H: GroupCommit>(
    ctx: &Ctx,
    handler: &H,
    jobs: &[Job<H>],
) -> Result<Vec<Committed<H::After>>, StageError> {
    let consumer = H::STAGE.as_str();
    let mut client = ctx.db.get().await?;
    let tx = client
        .transaction()
        .await
        .map_err(hermes_db::DbError::from)?;
    let hold = crate::relay::eager::hold(&ctx.db);
    let mut committed = Vec::with_capacity(jobs.len());
    for job in jobs {
        let applied = apply(handler, &job.env, job.prepared.clone(), &tx, consumer, hold).await?;
        let Some(one) = applied else {
            return Err(StageError::Duplicate("processed already"));
        };
        committed.push(one);
    }
    tx.commit().await.map_err(hermes_db::DbError::from)?;
    Ok(committed)
}
