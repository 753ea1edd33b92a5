//! Per-run event streams (`{ns}:run:{run_id}:events`, a Redis Stream): how a reply reaches
//! whichever ingest replica holds the waiting caller. Delivery appends and publishes a
//! wake-up on `{ns}:run-events`; each ingest process keeps one subscription and wakes the
//! local waiters, which read the stream from where they left off (and poll as a backstop,
//! so a lost wake-up only costs latency).
//!
//! A stream is written only where a reader can exist (docs/architecture.md#10-redis): an API or
//! REST run's, whose caller waits or may follow it; a chat or Forge run's only while someone
//! follows it with `GET /v1/runs/{id}/events`, which keeps the run's follower marker
//! (`{ns}:run:{run_id}:followed`) alive. Each stream is bounded in bytes
//! (`HERMES_RUN_EVENTS_MAX_BYTES`): past the bound further events are dropped (the final
//! answer carries the whole text anyway), and a final event that would not fit is written as
//! [`RunEvent::Closed`], a pointer to the run's row in PostgreSQL. The bytes a stream holds
//! travel in its last entry (`bytes`), so the bound costs no key of its own; one script
//! checks, appends, sets the expiry and wakes, in one round trip.

mod waiters;

pub use waiters::{WaiterGuard, Waiters, Wake};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use redis::streams::StreamRangeReply;
use serde::{Deserialize, Serialize};

use super::{Cache, CacheError};
use hermes_config::Config;
use hermes_types::ids::{ApiKeyId, RunId};
use hermes_types::model::{Outcome, Platform};

/// Upper bound of events kept per run.
const STREAM_MAX_LEN: usize = 2000;

/// How long a follower's marker lives without being renewed; a follower renews it well
/// before ([`FOLLOW_RENEW`]).
const FOLLOW_TTL_SECS: u64 = 60;
/// How often a follower renews its marker.
pub const FOLLOW_RENEW: Duration = Duration::from_secs(20);

/// Check the reader and the byte bound, append, expire and wake, in one round trip.
/// KEYS: the stream, the run's follower marker. ARGV: the event, the TTL, the byte bound,
/// whether the event is final, the wake-up channel, the run id, whether only a follower
/// reads the stream, the entry bound, the final event by reference. Returns the outcome,
/// the entry id (or '') and the bytes written. The wake-up names the run, followed by
/// ` more` when the event is not its last ([`Wake`]).
const APPEND: &str = r#"
if ARGV[7] == '1' and redis.call('EXISTS', KEYS[2]) == 0 then return {'unread', '', 0} end
local used = 0
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if last[1] then
  local fields = last[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 'bytes' then used = tonumber(fields[i + 1]) or 0 end
  end
end
local data = ARGV[1]
local outcome = 'written'
if used + #data > tonumber(ARGV[3]) then
  if ARGV[4] ~= '1' then return {'full', '', 0} end
  data = ARGV[9]
  outcome = 'final_by_reference'
end
used = used + #data
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[8], '*', 'event', data, 'bytes', used)
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[5], ARGV[4] == '1' and ARGV[6] or (ARGV[6] .. ' more'))
return {outcome, id, #data}
"#;

/// Who can read a run's stream, by the platform its reply goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readers {
    /// An API or REST run: its caller waits on the stream or may follow it at any time.
    Caller,
    /// A chat or Forge run: nobody, unless someone follows it (`GET /v1/runs/{id}/events`).
    Followers,
}

impl Readers {
    /// Who reads the stream of a run answering on `platform`.
    pub fn of(platform: Platform) -> Self {
        match platform {
            Platform::Api | Platform::Rest => Readers::Caller,
            Platform::Telegram
            | Platform::Whatsapp
            | Platform::Instagram
            | Platform::Slack
            | Platform::Sms
            | Platform::Messenger
            | Platform::Teams
            | Platform::Discord
            | Platform::Forge => Readers::Followers,
        }
    }
}

/// What an append did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Appended {
    /// The event is on the stream under this entry id.
    Written(String),
    /// The final event did not fit the stream's byte bound: [`RunEvent::Closed`] was
    /// written in its place under this entry id.
    ByReference(String),
    /// Nobody can read the run's stream: nothing was stored.
    Unread,
    /// The stream is at its byte bound: the event was dropped.
    Full,
}

impl Appended {
    /// The metric label of the outcome.
    pub fn as_str(&self) -> &'static str {
        match self {
            Appended::Written(_) => "written",
            Appended::ByReference(_) => "final_by_reference",
            Appended::Unread => "unread",
            Appended::Full => "full",
        }
    }
}

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
    /// The run ended, but its outcome did not fit the stream's byte bound: read it from the
    /// run's row. No more events follow.
    Closed,
}

impl RunEvent {
    /// Whether the event ends the run's stream.
    pub fn is_last(&self) -> bool {
        matches!(self, RunEvent::Final { .. } | RunEvent::Closed)
    }
}

/// The first processing of each model call round a caller saw deltas from. A model call
/// redelivered after a crash streams again under a new attempt; its deltas are dropped, so
/// a reader never sees two attempts interleaved ("HelHello wor…"), and the final answer's
/// remainder comes at the end (the final event carries the whole answer).
#[derive(Default)]
pub struct Attempts {
    followed: HashMap<u8, String>,
}

impl Attempts {
    /// Forward this delta? Deltas without an attempt (an older llm build) always pass.
    pub fn admit(&mut self, round: u8, attempt: Option<String>) -> bool {
        let Some(attempt) = attempt else {
            return true;
        };
        match self.followed.get(&round) {
            None => {
                self.followed.insert(round, attempt);
                true
            }
            Some(first) => *first == attempt,
        }
    }
}

/// Appends to and reads from run event streams.
#[derive(Clone)]
pub struct RunEvents {
    cache: Cache,
    /// How long a stream is kept after its last event (`HERMES_RUN_EVENTS_TTL_SECS`).
    ttl_secs: i64,
    /// The bytes of events one stream may take (`HERMES_RUN_EVENTS_MAX_BYTES`).
    max_bytes: usize,
    append: Arc<redis::Script>,
}

impl RunEvents {
    /// Streams on `cache`, each kept `HERMES_RUN_EVENTS_TTL_SECS` after its last event (at
    /// least a second) and bounded by `HERMES_RUN_EVENTS_MAX_BYTES`.
    pub fn new(cache: Cache, config: &Config) -> Self {
        Self::with_bounds(cache, config.run_events_ttl, config.run_events_max_bytes)
    }

    /// Streams kept `ttl` after their last event, of at most `max_bytes` each.
    pub fn with_bounds(cache: Cache, ttl: Duration, max_bytes: usize) -> Self {
        Self {
            cache,
            ttl_secs: ttl.as_secs().clamp(1, i64::MAX as u64) as i64,
            max_bytes,
            append: Arc::new(redis::Script::new(APPEND)),
        }
    }

    fn stream_key(&self, run: RunId) -> String {
        self.cache.key(format_args!("run:{run}:events"))
    }

    fn follow_key(&self, run: RunId) -> String {
        self.cache.key(format_args!("run:{run}:followed"))
    }

    fn wake_channel(&self) -> String {
        self.cache.key("run-events")
    }

    /// The keys a run's events take (its stream and its follower marker): what erasing a
    /// person removes for each of their runs.
    pub fn keys_of(&self, run: RunId) -> [String; 2] {
        [self.stream_key(run), self.follow_key(run)]
    }

    /// Append an event of a run answering on `platform` and wake the waiting ingest replica,
    /// where a reader can exist and within the stream's byte bound (see [`Appended`]).
    pub async fn append(
        &self,
        run: RunId,
        platform: Platform,
        event: &RunEvent,
    ) -> Result<Appended, CacheError> {
        let data = serde_json::to_string(event)?;
        let by_reference = serde_json::to_string(&RunEvent::Closed)?;
        let mut c = self.cache.conn();
        let (outcome, id, bytes): (String, String, u64) = self
            .append
            .key(self.stream_key(run))
            .key(self.follow_key(run))
            .arg(data)
            .arg(self.ttl_secs)
            .arg(self.max_bytes)
            .arg(if event.is_last() { "1" } else { "0" })
            .arg(self.wake_channel())
            .arg(run.to_string())
            .arg(if Readers::of(platform) == Readers::Followers {
                "1"
            } else {
                "0"
            })
            .arg(STREAM_MAX_LEN)
            .arg(by_reference)
            .invoke_async(&mut c)
            .await
            .map_err(|e| self.cache.failed("run_events_append", e))?;
        let appended = match outcome.as_str() {
            "written" => Appended::Written(id),
            "final_by_reference" => Appended::ByReference(id),
            "unread" => Appended::Unread,
            _ => Appended::Full,
        };
        let m = &self.cache.metrics.run_events;
        m.events
            .with_label_values(&[platform.as_str(), appended.as_str()])
            .inc();
        if bytes > 0 {
            m.bytes
                .with_label_values(&[platform.as_str()])
                .inc_by(bytes);
        }
        if appended == Appended::Full {
            tracing::debug!(%run, max_bytes = self.max_bytes, "run event stream full; event dropped");
        }
        Ok(appended)
    }

    /// Mark `run` as followed (`GET /v1/runs/{id}/events`) for the next minute, so that the
    /// events of a chat or Forge run are written to its stream; renewed every
    /// [`FOLLOW_RENEW`] while the follower stays.
    pub async fn follow(&self, run: RunId) -> Result<(), CacheError> {
        let mut c = self.cache.conn();
        c.set_ex::<_, _, ()>(self.follow_key(run), 1, FOLLOW_TTL_SECS)
            .await
            .map_err(|e| self.cache.failed("run_events_follow", e))
    }

    /// Remove the streams and follower markers of `runs` (erasing a person); the number of
    /// keys removed.
    pub async fn remove(&self, runs: &[RunId]) -> Result<usize, CacheError> {
        let mut removed = 0;
        let mut c = self.cache.conn();
        for chunk in runs.chunks(50) {
            let keys: Vec<String> = chunk.iter().flat_map(|r| self.keys_of(*r)).collect();
            removed += c
                .del::<_, usize>(keys)
                .await
                .map_err(|e| self.cache.failed("run_events_remove", e))?;
        }
        Ok(removed)
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
        self.cache.metrics.run_events.reads.inc();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_api_and_rest_runs_are_read_without_a_follower() {
        for p in [Platform::Api, Platform::Rest] {
            assert_eq!(Readers::of(p), Readers::Caller, "{p:?}");
        }
        for p in [
            Platform::Telegram,
            Platform::Whatsapp,
            Platform::Instagram,
            Platform::Slack,
            Platform::Forge,
        ] {
            assert_eq!(Readers::of(p), Readers::Followers, "{p:?}");
        }
    }

    #[test]
    fn the_final_pointer_is_short_and_ends_the_stream() {
        let text = serde_json::to_string(&RunEvent::Closed).unwrap();
        assert_eq!(text, r#"{"type":"closed"}"#);
        assert!(RunEvent::Closed.is_last());
        assert!(!RunEvent::StopRequested.is_last());
    }
}
