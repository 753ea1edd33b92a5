//! Per-run event streams (`{ns}:run:{run_id}:events`, a Redis Stream): how a reply reaches
//! whichever ingest replica holds the waiting caller. Delivery appends and publishes a
//! wake-up on `{ns}:run-events`; each ingest process keeps one subscription and wakes the
//! local waiters, which read the stream from where they left off (and poll as a backstop,
//! so a lost wake-up only costs latency).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redis::AsyncCommands;
use redis::streams::{StreamMaxlen, StreamRangeReply};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Cache, CacheError};
use hermes_types::ids::RunId;
use hermes_types::model::Outcome;
use hermes_types::sync;

/// Streams are kept this long after their last event.
const STREAM_TTL_SECS: i64 = 3600;
/// Upper bound of events kept per run.
const STREAM_MAX_LEN: usize = 2000;

/// One event on a run's stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
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
}

impl RunEvents {
    pub fn new(cache: Cache) -> Self {
        Self { cache }
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
            .expire(&key, STREAM_TTL_SECS)
            .publish(self.wake_channel(), run.to_string())
            .query_async(&mut c)
            .await
            .map_err(|e| self.cache.failed("run_events_append", e))?;
        Ok(id)
    }

    /// Events after entry id `after` ("0" for all), in order.
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
            if let Some(raw) = entry.get::<String>("event") {
                out.push((entry.id, serde_json::from_str(&raw)?));
            }
        }
        Ok(out)
    }
}

/// The per-process registry of callers waiting on runs, fed by one pub/sub subscription.
#[derive(Clone, Default)]
pub struct Waiters {
    map: Arc<Mutex<HashMap<RunId, Arc<Notify>>>>,
}

/// Removes the waiter's entry when the caller goes away (answered, timed out or dropped).
pub struct WaiterGuard {
    waiters: Waiters,
    run: RunId,
    pub notify: Arc<Notify>,
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        sync::lock(&self.waiters.map).remove(&self.run);
    }
}

impl Waiters {
    /// Register interest in `run` before anything can be published for it.
    pub fn register(&self, run: RunId) -> WaiterGuard {
        let notify = Arc::new(Notify::new());
        sync::lock(&self.map).insert(run, notify.clone());
        WaiterGuard {
            waiters: self.clone(),
            run,
            notify,
        }
    }

    fn wake(&self, run: RunId) {
        if let Some(n) = sync::lock(&self.map).get(&run) {
            n.notify_one();
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
                        for n in sync::lock(&waiters.map).values() {
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
