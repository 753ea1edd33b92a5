//! The per-process registry of callers waiting on runs, fed by one pub/sub subscription to
//! the run-events wake-up channel. A follower of a run's events is woken by each of them; a
//! caller waiting for the run's outcome only by its last, so it reads the run's stream once
//! (docs/architecture.md#10-redis).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::Cache;
use hermes_types::ids::RunId;
use hermes_types::sync;

/// Which of a run's events wake a waiter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Every event: a stream forwarded as it grows.
    Every,
    /// Only the event that ends the run: a caller waiting for its outcome. Registered
    /// before the run's message is published, so the stream holds nothing before the wait.
    Last,
}

/// One registered waiter: its token (to remove exactly it), what wakes it and its wake-up.
type Waiter = (u64, Wake, Arc<Notify>);

/// The waiters of this process, by run. A run may have several in one process (two
/// dashboards following its events, a caller that reconnected before its old connection was
/// dropped); each is woken.
#[derive(Clone, Default)]
pub struct Waiters {
    map: Arc<Mutex<HashMap<RunId, Vec<Waiter>>>>,
    next: Arc<AtomicU64>,
}

/// Removes the waiter's entry when the caller goes away (answered, timed out or dropped).
pub struct WaiterGuard {
    waiters: Waiters,
    run: RunId,
    token: u64,
    /// What wakes it.
    pub wake: Wake,
    pub notify: Arc<Notify>,
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        let mut map = sync::lock(&self.waiters.map);
        if let Some(list) = map.get_mut(&self.run) {
            list.retain(|(token, _, _)| *token != self.token);
            if list.is_empty() {
                map.remove(&self.run);
            }
        }
    }
}

/// The run a wake-up names, and whether the event was the run's last. A bare run id (what
/// a writer older than [`Wake`] sends for every event) counts as last: a waiter for the last
/// event then reads early, and finds the outcome or waits again.
fn parse(payload: &str) -> Option<(RunId, bool)> {
    let (run, last) = match payload.split_once(' ') {
        Some((run, "more")) => (run, false),
        Some(_) => return None,
        None => (payload, true),
    };
    run.parse().ok().map(|run| (run, last))
}

impl Waiters {
    /// Register interest in `run` before anything can be published for it.
    pub fn register(&self, run: RunId, wake: Wake) -> WaiterGuard {
        let notify = Arc::new(Notify::new());
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        sync::lock(&self.map)
            .entry(run)
            .or_default()
            .push((token, wake, notify.clone()));
        WaiterGuard {
            waiters: self.clone(),
            run,
            token,
            wake,
            notify,
        }
    }

    fn wake(&self, run: RunId, last: bool) {
        if let Some(list) = sync::lock(&self.map).get(&run) {
            for (_, wake, n) in list {
                if last || *wake == Wake::Every {
                    n.notify_one();
                }
            }
        }
    }

    /// Subscribe to the wake-up channel until `stop`, reconnecting when Redis drops.
    pub fn spawn_subscriber(
        &self,
        cache: Cache,
        stop: CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        let waiters = self.clone();
        let channel = cache.key("run-events");
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                let subscribed = async {
                    let mut pubsub = cache.client().get_async_pubsub().await?;
                    pubsub.subscribe(&channel).await?;
                    Ok::<_, redis::RedisError>(pubsub)
                };
                match tokio::time::timeout(Duration::from_secs(2), subscribed).await {
                    Ok(Ok(mut pubsub)) => {
                        // Wake everyone once: events may have arrived while we were away.
                        for (_, _, n) in sync::lock(&waiters.map).values().flatten() {
                            n.notify_one();
                        }
                        let mut messages = pubsub.on_message();
                        loop {
                            tokio::select! {
                                _ = stop.cancelled() => return,
                                m = messages.next() => match m {
                                    Some(msg) => {
                                        if let Some((run, last)) = msg.get_payload::<String>().ok().as_deref().and_then(parse) {
                                            waiters.wake(run, last)
                                        }
                                    }
                                    None => break,
                                }
                            }
                        }
                        tracing::warn!("run-events subscription lost; resubscribing");
                    }
                    Ok(Err(e)) => {
                        cache.failed("run_events_subscribe", e);
                    }
                    Err(_) => {
                        cache
                            .metrics
                            .process
                            .redis_errors
                            .with_label_values(&["run_events_subscribe"])
                            .inc();
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_waiter_of_a_run_is_woken_and_each_leaves_alone() {
        let waiters = Waiters::default();
        let run = RunId::new();
        let first = waiters.register(run, Wake::Every);
        let second = waiters.register(run, Wake::Every);
        waiters.wake(run, false);
        // A wake-up stored as a permit: both return at once.
        first.notify.notified().await;
        second.notify.notified().await;
        drop(first);
        assert_eq!(sync::lock(&waiters.map)[&run].len(), 1);
        waiters.wake(run, true);
        second.notify.notified().await;
        drop(second);
        assert!(sync::lock(&waiters.map).is_empty());
    }

    #[tokio::test]
    async fn a_waiter_for_the_last_event_sleeps_through_the_others() {
        use futures_util::FutureExt;
        let waiters = Waiters::default();
        let run = RunId::new();
        let last = waiters.register(run, Wake::Last);
        waiters.wake(run, false);
        assert!(last.notify.notified().now_or_never().is_none(), "not woken");
        waiters.wake(run, true);
        assert!(last.notify.notified().now_or_never().is_some(), "woken");
    }

    #[test]
    fn a_wake_up_names_its_run_and_whether_more_follows() {
        let run = RunId::new();
        assert_eq!(parse(&format!("{run} more")), Some((run, false)));
        assert_eq!(parse(&run.to_string()), Some((run, true)));
        assert_eq!(parse(&format!("{run} other")), None);
        assert_eq!(parse("not-a-run"), None);
    }
}
