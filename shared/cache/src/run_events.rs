//! Per-run event streams (`{ns}:run:{run_id}:events`, a Redis Stream): how a reply reaches
//! whichever ingest replica holds the waiting caller. Delivery appends and publishes a
//! wake-up on `{ns}:run-events`; each ingest process keeps one subscription and wakes the
//! local waiters, which read the stream from where they left off (and poll as a backstop,
//! so a lost wake-up only costs latency).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redis::AsyncCommands;
use redis::streams::{StreamMaxlen, StreamRangeReply};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Cache, CacheError};
use hermes_types::ids::{ApiKeyId, RunId};
use hermes_types::model::Outcome;
use hermes_types::sync;

/// Upper bound of events kept per run.
const STREAM_MAX_LEN: usize = 2000;

/// One event on a run's stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    /// Ingest accepted the run (`POST /v1/runs`) and is about to hand it to the broker:
    /// the first event of a run's stream. It names the key that created the run, so the run
    /// can be shown to that key before the router has written its row (docs/api.md, runs).
    Queued {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        api_key: Option<ApiKeyId>,
        /// The caller's own conversation id, shown back on the run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        session_id: Option<String>,
    },
    /// The llm stage began a model call of the run (`round` 0, or 1 after the tool round).
    Running { round: u8 },
    /// A stop was asked for (`POST /v1/runs/{id}/stop`): the run ends `cancelled` at its next
    /// safe point.
    StopRequested,
    /// A piece of streamed answer text, from one processing (`attempt`) of one model call
    /// (`round`: 0, or 1 after the tool round). A redelivered model call streams again under
    /// a new attempt; readers follow the first attempt of each round and drop the others, so
    /// two attempts never interleave (docs/api.md, streaming).
    Delta {
        text: String,
        #[serde(default)]
        round: u8,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attempt: Option<String>,
    },
    /// The tools stage began executing one tool call the model asked for (in `round`).
    ToolStarted {
        round: u8,
        call_id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// A tool call finished: its output as the model will see it, and whether it succeeded.
    ToolFinished {
        round: u8,
        call_id: String,
        name: String,
        output: String,
        ok: bool,
    },
    /// The run ended: no more events follow.
    Final { outcome: Outcome },
}

/// Appends to and reads from run event streams.
#[derive(Clone)]
pub struct RunEvents {
    cache: Cache,
    /// How long a stream is kept after its last event (`HERMES_RUN_EVENTS_TTL_SECS`).
    ttl_secs: i64,
}

impl RunEvents {
    /// Streams on `cache`, each kept `ttl` after its last event (at least a second).
    pub fn new(cache: Cache, ttl: Duration) -> Self {
        Self {
            cache,
            ttl_secs: ttl.as_secs().clamp(1, i64::MAX as u64) as i64,
        }
    }

    fn stream_key(&self, run: RunId) -> String {
        self.cache.key(format_args!("run:{run}:events"))
    }

    fn wake_channel(&self) -> String {
        self.cache.key("run-events")
    }

    /// Append an event and wake the waiting ingest replica. Returns the stream entry id.
    pub async fn append(&self, run: RunId, event: &RunEvent) -> Result<String, CacheError> {
        let key = self.stream_key(run);
        let data = serde_json::to_string(event)?;
        let mut c = self.cache.conn();
        let (id, _, _): (String, i64, i64) = redis::pipe()
            .atomic()
            .xadd_maxlen(
                &key,
                StreamMaxlen::Approx(STREAM_MAX_LEN),
                "*",
                &[("event", data.as_str())],
            )
            .expire(&key, self.ttl_secs)
            .publish(self.wake_channel(), run.to_string())
            .query_async(&mut c)
            .await
            .map_err(|e| self.cache.failed("run_events_append", e))?;
        Ok(id)
    }

    /// The first event of the run's stream (a run made by `POST /v1/runs` starts with
    /// [`RunEvent::Queued`]), if the stream exists.
    pub async fn first(&self, run: RunId) -> Result<Option<(String, RunEvent)>, CacheError> {
        let mut c = self.cache.conn();
        let reply: StreamRangeReply = c
            .xrange_count(self.stream_key(run), "-", "+", 1)
            .await
            .map_err(|e| self.cache.failed("run_events_read", e))?;
        match reply.ids.into_iter().next() {
            Some(entry) => match entry.get::<String>("event") {
                Some(raw) => Ok(Some((entry.id, serde_json::from_str(&raw)?))),
                None => Ok(None),
            },
            None => Ok(None),
        }
    }

    /// Drop the run's stream (a run the broker never took).
    pub async fn forget(&self, run: RunId) -> Result<(), CacheError> {
        let mut c = self.cache.conn();
        c.del::<_, ()>(self.stream_key(run))
            .await
            .map_err(|e| self.cache.failed("run_events_forget", e))
    }

    /// Events after entry id `after` ("0" for all), in order. An event this build cannot
    /// read (a kind a newer writer added during a rolling upgrade) is passed over, so the
    /// events around it still arrive.
    pub async fn read_after(
        &self,
        run: RunId,
        after: &str,
    ) -> Result<Vec<(String, RunEvent)>, CacheError> {
        let mut c = self.cache.conn();
        let start = if after == "0" {
            "-".to_string()
        } else {
            format!("({after}")
        };
        let reply: StreamRangeReply = c
            .xrange(self.stream_key(run), start, "+")
            .await
            .map_err(|e| self.cache.failed("run_events_read", e))?;
        let mut out = Vec::with_capacity(reply.ids.len());
        for entry in reply.ids {
            let Some(raw) = entry.get::<String>("event") else {
                continue;
            };
            match serde_json::from_str(&raw) {
                Ok(event) => out.push((entry.id, event)),
                Err(e) => {
                    tracing::debug!(%run, id = entry.id, error = %e, "run event of an unknown kind passed over")
                }
            }
        }
        Ok(out)
    }
}

/// One registered waiter: its token (to remove exactly it) and its wake-up.
type Waiter = (u64, Arc<Notify>);

/// The per-process registry of callers waiting on runs, fed by one pub/sub subscription.
/// A run may have several waiters in one process (two dashboards following its events, a
/// caller that reconnected before its old connection was dropped); each is woken.
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
    pub notify: Arc<Notify>,
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        let mut map = sync::lock(&self.waiters.map);
        if let Some(list) = map.get_mut(&self.run) {
            list.retain(|(token, _)| *token != self.token);
            if list.is_empty() {
                map.remove(&self.run);
            }
        }
    }
}

impl Waiters {
    /// Register interest in `run` before anything can be published for it.
    pub fn register(&self, run: RunId) -> WaiterGuard {
        let notify = Arc::new(Notify::new());
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        sync::lock(&self.map)
            .entry(run)
            .or_default()
            .push((token, notify.clone()));
        WaiterGuard {
            waiters: self.clone(),
            run,
            token,
            notify,
        }
    }

    fn wake(&self, run: RunId) {
        if let Some(list) = sync::lock(&self.map).get(&run) {
            for (_, n) in list {
                n.notify_one();
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
                        for (_, n) in sync::lock(&waiters.map).values().flatten() {
                            n.notify_one();
                        }
                        let mut messages = pubsub.on_message();
                        loop {
                            tokio::select! {
                                _ = stop.cancelled() => return,
                                m = messages.next() => match m {
                                    Some(msg) => {
                                        if let Ok(Ok(run)) = msg.get_payload::<String>().map(|s| s.parse::<RunId>()) {
                                            waiters.wake(run)
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
        let first = waiters.register(run);
        let second = waiters.register(run);
        waiters.wake(run);
        // A wake-up stored as a permit: both return at once.
        first.notify.notified().await;
        second.notify.notified().await;
        drop(first);
        assert_eq!(sync::lock(&waiters.map)[&run].len(), 1);
        waiters.wake(run);
        second.notify.notified().await;
        drop(second);
        assert!(sync::lock(&waiters.map).is_empty());
    }
}
