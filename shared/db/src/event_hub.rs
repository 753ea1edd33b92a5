//! Waiting for the next event (docs/operator-mcp.md, events): one poller per process,
//! fanned out to every waiter through a generation counter, so a thousand waiting
//! `events_wait` calls cost one query every [`POLL`], not a thousand.
//!
//! **Why a poll and not `NOTIFY`.** Writers pay nothing for their readers: an insert into
//! `events` used to notify at commit, and PostgreSQL serializes notifying commits (a
//! database-wide lock held until the commit is flushed), which cost the fleet's hot path
//! (docs/performance.md, "NOTIFY at commit"). The poller runs only while something waits,
//! and reads the log's settled head ([`events::head`], one indexed row): the head moves
//! exactly when a read by cursor can return more, including events an older transaction held
//! back and released by ending.
//!
//! A wake-up only says "look again": the log itself ([`events::after`]) decides what a
//! waiter is shown, so a wake-up that is early or extra changes nothing but when the waiter
//! looks. Two things wake a waiter:
//!
//! - the head moving;
//! - the poller starting after an idle spell: what committed before its first read is not a
//!   move of the head it knows, so every waiter looks once more.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::events::{self, Cursor, Filter, Page};
use super::{Db, DbError};

/// How often the poller reads the log's head while something waits: the most an event
/// reaches its waiter after it settles, plus the waiter's read.
pub const POLL: Duration = Duration::from_millis(50);

/// The pause after a failed read of the head (PostgreSQL away): waiters keep their
/// deadlines, and look again when the poller does.
const RETRY: Duration = Duration::from_secs(1);

/// The process's one poller of the log and the waiters' shared wake-up counter.
#[derive(Clone)]
pub struct EventHub {
    db: Db,
    generation: watch::Receiver<u64>,
    /// Whether the poller has read the head at least once (readiness, tests).
    listening: watch::Receiver<bool>,
    waiters: Arc<Waiters>,
}

/// How many watches are pending, and the poller's wake-up when the first one comes.
#[derive(Default)]
struct Waiters {
    count: AtomicUsize,
    first: Notify,
}

/// A pending watch, counted while it lives.
struct Waiting<'a>(&'a Waiters);

impl<'a> Waiting<'a> {
    fn new(waiters: &'a Waiters) -> Self {
        if waiters.count.fetch_add(1, Ordering::SeqCst) == 0 {
            waiters.first.notify_one();
        }
        Self(waiters)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::SeqCst);
    }
}

impl EventHub {
    /// Start the poller on `db` until `stop`. Returns the hub (cheap to clone, one per
    /// process) and the poller's task.
    pub fn start(db: &Db, stop: CancellationToken) -> (Self, JoinHandle<()>) {
        let (bump, generation) = watch::channel(0u64);
        let (up, listening) = watch::channel(false);
        let waiters = Arc::new(Waiters::default());
        let task = tokio::spawn(poll(db.clone(), waiters.clone(), bump, up, stop));
        let hub = Self {
            db: db.clone(),
            generation,
            listening,
            waiters,
        };
        (hub, task)
    }

    /// Whether the poller has read the log's head at least once (readiness, tests).
    pub fn is_listening(&self) -> bool {
        *self.listening.borrow()
    }

    /// Wait until the poller has read the head once, or `timeout` passes; true when it has.
    pub async fn ready(&self, timeout: Duration) -> bool {
        let mut listening = self.listening.clone();
        tokio::time::timeout(timeout, listening.wait_for(|up| *up))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The pool the hub reads with.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Call `look` until it is [`Look::Done`] or `timeout` passes (then the last value it
    /// gave), calling it again at each wake-up of the hub.
    pub async fn watch<T, F, Fut>(&self, timeout: Duration, mut look: F) -> Result<T, DbError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Look<T>, DbError>>,
    {
        let deadline = Instant::now() + timeout;
        let mut wakes = self.generation.clone();
        // Counted before the first look, so the poller runs while it may matter.
        let _waiting = Waiting::new(&self.waiters);
        loop {
            // Mark the current generation seen before looking: a notification that commits
            // after the look bumps it again, so it cannot slip between the look and the wait.
            wakes.borrow_and_update();
            let value = match look().await? {
                Look::Done(v) => return Ok(v),
                Look::Later(v) => v,
            };
            if Instant::now() >= deadline {
                return Ok(value);
            }
            tokio::select! {
                changed = wakes.changed() => {
                    if changed.is_err() {
                        // The poller stopped with the process: answer now with what is.
                        return Ok(value);
                    }
                }
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// The events after `after` that match `filter` (at most `limit`), waiting up to
    /// `timeout` for the first one. On timeout the page is empty and its `next` is where
    /// the caller continues (past events the filter skipped, never past one it matches).
    pub async fn wait(
        &self,
        after: Cursor,
        filter: &Filter,
        limit: i64,
        timeout: Duration,
    ) -> Result<Page, DbError> {
        // Where the next look starts (past what earlier looks scanned); a mutex only because
        // the future must be `Send`, never contended.
        let cursor = Mutex::new(after);
        let (cursor, db) = (&cursor, &self.db);
        self.watch(timeout, move || async move {
            let client = db.get().await?;
            let from = *cursor.lock().unwrap_or_else(|e| e.into_inner());
            let page = events::after(&client, from, filter, limit).await?;
            *cursor.lock().unwrap_or_else(|e| e.into_inner()) = page.next;
            // Events held back by an older transaction move the head when it ends.
            Ok(if page.events.is_empty() {
                Look::Later(page)
            } else {
                Look::Done(page)
            })
        })
        .await
    }
}

/// Read the log's head every [`POLL`] while anything waits, and bump the generation when it
/// moves (and once after each idle spell), until `stop`.
async fn poll(
    db: Db,
    waiters: Arc<Waiters>,
    bump: watch::Sender<u64>,
    up: watch::Sender<bool>,
    stop: CancellationToken,
) {
    let mut known: Option<Cursor> = None;
    loop {
        if waiters.count.load(Ordering::SeqCst) == 0 {
            // Idle: what commits meanwhile is not followed, so the next spell starts afresh.
            known = None;
            if *up.borrow() {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = waiters.first.notified() => {}
                }
            }
        }
        let head = match db.get().await {
            Ok(client) => events::head(&client).await,
            Err(e) => Err(e),
        };
        let pause = match head {
            Ok(head) => {
                up.send_replace(true);
                if known != Some(head) {
                    // A move, or the first read of a spell (`known` was none): look again.
                    bump.send_modify(|g| *g = g.wrapping_add(1));
                    known = Some(head);
                }
                POLL
            }
            Err(e) => {
                tracing::debug!(error = %e, "the event log's head is unreadable now");
                RETRY
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(pause) => {}
        }
    }
}

/// What a [`EventHub::watch`] look found.
pub enum Look<T> {
    /// What was awaited: return it.
    Done(T),
    /// Not yet: look again at the next wake-up (or return this at the deadline).
    Later(T),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{EventKind, NewEvent, record};
    use crate::scratch::ScratchDb;
    use hermes_types::ids::RunId;

    /// A waiter for whatever comes after `start`, for up to 30 s.
    fn waiter(hub: &EventHub, start: Cursor) -> JoinHandle<Result<Page, DbError>> {
        let hub = hub.clone();
        tokio::spawn(async move {
            hub.wait(start, &Filter::default(), 10, Duration::from_secs(30))
                .await
        })
    }

    /// Write a `message` event of a new run; returns the run.
    async fn write(client: &impl crate::GenericClient) -> RunId {
        let run = RunId::new();
        let event = NewEvent::of_run(EventKind::Message, run, serde_json::Value::Null);
        record(client, &event).await.unwrap();
        run
    }

    #[tokio::test]
    async fn a_waiter_is_woken_by_a_commit_and_times_out_on_silence() {
        ScratchDb::with(|db| async move {
            let stop = CancellationToken::new();
            let (hub, task) = EventHub::start(&db, stop.clone());
            assert!(hub.ready(Duration::from_secs(10)).await);
            let client = db.get().await.unwrap();
            let start = events::head(&client).await.unwrap();

            // Silence: the wait ends empty, keeping its place.
            let page = hub
                .wait(start, &Filter::default(), 10, Duration::from_millis(1))
                .await
                .unwrap();
            assert!(page.events.is_empty());
            assert_eq!(page.next, start);

            // A waiter started before the write returns it (the write comes after the
            // waiter's cursor, so whenever it commits the waiter sees it).
            let waiting = waiter(&hub, start);
            let run = write(&client).await;
            let page = waiting.await.unwrap().unwrap();
            assert_eq!(page.events.len(), 1);
            assert_eq!(page.events[0].run_id, Some(run));
            stop.cancel();
            task.await.unwrap();
        })
        .await
    }

    #[tokio::test]
    async fn a_waiter_sees_an_event_once_the_older_transaction_holding_it_back_ends() {
        ScratchDb::with(|db| async move {
            let stop = CancellationToken::new();
            let (hub, task) = EventHub::start(&db, stop.clone());
            let client = db.get().await.unwrap();
            let start = events::head(&client).await.unwrap();
            // An older transaction, with an id, still running: the event committed after it
            // began is held back until it ends, and its end writes nothing to `events`.
            let mut older = db.get().await.unwrap();
            let older = older.transaction().await.unwrap();
            older
                .query_one("SELECT pg_current_xact_id()", &[])
                .await
                .unwrap();
            let run = write(&client).await;
            let held = events::after(&client, start, &Filter::default(), 10)
                .await
                .unwrap();
            assert!(held.events.is_empty() && held.held_back, "{held:?}");
            let waiting = waiter(&hub, start);
            older.commit().await.unwrap();
            let page = waiting.await.unwrap().unwrap();
            assert_eq!(page.events.len(), 1);
            assert_eq!(page.events[0].run_id, Some(run));
            stop.cancel();
            task.await.unwrap();
        })
        .await
    }
}
