//! Waiting for the next event (docs/operator-mcp.md, events): one `LISTEN hermes_events`
//! connection per process, fanned out to every waiter through a generation counter, so a
//! thousand waiting `events_wait` calls cost one connection, not a thousand.
//!
//! A notification only says "look again": the log itself ([`events::after`]) decides what a
//! waiter is shown, so a notification that is lost, duplicated or early changes nothing but
//! when the waiter looks. Three things wake a waiter:
//!
//! - a notification (an insert into `events` committed);
//! - the listener (re)connecting: notifications sent while no connection listened are lost,
//!   so every waiter reads the log again;
//! - a short pause when the last read reported [`Page::held_back`] events: those are released
//!   when an older transaction ends, and that end notifies nobody (the transaction may have
//!   written nothing to `events`).
//!
//! Otherwise a waiter sleeps until its deadline: there is no polling loop.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::events::{self, CHANNEL, Cursor, Filter, Page};
use super::listen::{ListenEvent, listen};
use super::{Db, DbError};

/// How long a waiter whose read reported held-back events waits before reading again
/// (their release sends no notification).
pub const HELD_BACK_PAUSE: Duration = Duration::from_millis(50);

/// The process's one listener on [`CHANNEL`] and the waiters' shared wake-up counter.
#[derive(Clone)]
pub struct EventHub {
    db: Db,
    generation: watch::Receiver<u64>,
    listening: watch::Receiver<bool>,
}

impl EventHub {
    /// Start listening on `db` until `stop`. Returns the hub (cheap to clone, one per
    /// process) and the listener's task.
    pub fn start(db: &Db, stop: CancellationToken) -> (Self, JoinHandle<()>) {
        let (bump, generation) = watch::channel(0u64);
        let (up, listening) = watch::channel(false);
        let task = listen(db, CHANNEL, stop, move |event| {
            if let ListenEvent::Listening { resumed } = event {
                if resumed {
                    tracing::info!("event listener reconnected: every waiter reads the log again");
                }
                up.send_replace(true);
            }
            // A notification, or a (re)connection after which anything may have been missed:
            // either way every waiter reads the log again.
            bump.send_modify(|g| *g = g.wrapping_add(1));
        });
        let hub = Self {
            db: db.clone(),
            generation,
            listening,
        };
        (hub, task)
    }

    /// Whether the listener has been listening at least once (readiness, tests).
    pub fn is_listening(&self) -> bool {
        *self.listening.borrow()
    }

    /// Wait until the listener is listening, or `timeout` passes; true when it is.
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
    /// gave), calling it again at each wake-up of the hub (and after [`HELD_BACK_PAUSE`]
    /// when it says [`Look::Soon`]).
    pub async fn watch<T, F, Fut>(&self, timeout: Duration, mut look: F) -> Result<T, DbError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Look<T>, DbError>>,
    {
        let deadline = Instant::now() + timeout;
        let mut wakes = self.generation.clone();
        loop {
            // Mark the current generation seen before looking: a notification that commits
            // after the look bumps it again, so it cannot slip between the look and the wait.
            wakes.borrow_and_update();
            let (value, look_again) = match look().await? {
                Look::Done(v) => return Ok(v),
                Look::Later(v) => (v, deadline),
                Look::Soon(v) => (v, deadline.min(Instant::now() + HELD_BACK_PAUSE)),
            };
            if Instant::now() >= deadline {
                return Ok(value);
            }
            tokio::select! {
                changed = wakes.changed() => {
                    if changed.is_err() {
                        // The listener stopped with the process: answer now with what is.
                        return Ok(value);
                    }
                }
                _ = tokio::time::sleep_until(look_again) => {}
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
            Ok(if !page.events.is_empty() {
                Look::Done(page)
            } else if page.held_back {
                Look::Soon(page)
            } else {
                Look::Later(page)
            })
        })
        .await
    }
}

/// What a [`EventHub::watch`] look found.
pub enum Look<T> {
    /// What was awaited: return it.
    Done(T),
    /// Not yet: look again at the next wake-up (or return this at the deadline).
    Later(T),
    /// Not yet, and something may change without a notification: look again shortly.
    Soon(T),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{EventKind, NewEvent, record};
    use crate::scratch::ScratchDb;
    use hermes_types::ids::RunId;

    /// A hub listening on `db`, with its stop and task.
    async fn listening(db: &Db) -> (CancellationToken, EventHub, JoinHandle<()>) {
        let stop = CancellationToken::new();
        let (hub, task) = EventHub::start(db, stop.clone());
        assert!(hub.ready(Duration::from_secs(10)).await);
        (stop, hub, task)
    }

    /// A waiter for whatever comes after `start`, for up to 30 s.
    fn waiter(hub: &EventHub, start: Cursor) -> JoinHandle<Result<Page, DbError>> {
        let hub = hub.clone();
        tokio::spawn(async move {
            hub.wait(start, &Filter::default(), 10, Duration::from_secs(30))
                .await
        })
    }

    /// The waiter returns the event of `run`, and nothing else.
    async fn returns_only(waiting: JoinHandle<Result<Page, DbError>>, run: RunId) {
        let page = waiting.await.unwrap().unwrap();
        assert_eq!(page.events.len(), 1);
        assert_eq!(page.events[0].run_id, Some(run));
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
            let (stop, hub, task) = listening(&db).await;
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
            returns_only(waiting, run).await;
            stop.cancel();
            task.await.unwrap();
        })
        .await
    }

    #[tokio::test]
    async fn a_waiter_sees_an_event_once_the_older_transaction_holding_it_back_ends() {
        ScratchDb::with(|db| async move {
            let (stop, hub, task) = listening(&db).await;
            let client = db.get().await.unwrap();
            let start = events::head(&client).await.unwrap();
            // An older transaction, with an id, still running: the event committed after it
            // began is held back until it ends, and its end notifies nobody.
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
            returns_only(waiting, run).await;
            stop.cancel();
            task.await.unwrap();
        })
        .await
    }
}
