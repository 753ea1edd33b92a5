//! `Idempotency-Key` records of the HTTP API (docs/api.md, idempotency): one key per
//! (calling key, idempotency key) holds first a pending marker, taken with `SET NX` by the
//! request that runs, then the answer that request gave, kept 24 hours. Every replica reads
//! the same records, so a retry reaching another replica is answered the same way.

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use super::{Cache, CacheError};

/// How long an answer is kept for replays.
pub const WINDOW_SECS: u64 = 24 * 3600;

/// Replace (or, without a new value, delete) a record only while it is still the pending
/// marker this request took: a marker that expired and was taken by another request is
/// not theirs to overwrite.
const FINISH: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
end
return 1
"#;

/// What a request's answer was, as kept for replays.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The answer's `Content-Type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The run the answer named (`x-hermes-run-id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The body; `None` when it was not kept whole (an event stream, or a body over the
    /// size kept), and a replay names the run instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// One idempotency record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Record {
    /// A request with this key is running; `token` names it.
    Pending { hash: String, token: String },
    /// A request with this key was answered.
    Done { hash: String, answer: StoredAnswer },
}

impl Record {
    /// The hash of the request the record belongs to (its route and body).
    pub fn hash(&self) -> &str {
        match self {
            Record::Pending { hash, .. } | Record::Done { hash, .. } => hash,
        }
    }
}

/// What taking a key found.
#[derive(Debug, PartialEq, Eq)]
pub enum Begin {
    /// The key is this request's; finish it with this marker.
    Taken(Record),
    /// Another request holds or answered it.
    Found(Record),
}

/// The records, in Redis.
#[derive(Clone)]
pub struct Idempotency {
    cache: Cache,
    finish: redis::Script,
}

impl Idempotency {
    pub fn new(cache: Cache) -> Self {
        Self {
            cache,
            finish: redis::Script::new(FINISH),
        }
    }

    /// The Redis key of `key` as sent by `scope` (the calling key's id): two callers never
    /// share a record, and the key itself is hashed (it is the caller's text).
    pub fn key(&self, scope: &str, key: &str) -> String {
        self.cache.key(format_args!(
            "idempotency:{scope}:{}",
            self.cache.opaque(key)
        ))
    }

    /// Take `key` for a request hashing to `hash` (the marker lives `pending_secs`, so a
    /// replica that dies mid-request does not hold it for ever), or read what holds it.
    pub async fn begin(
        &self,
        key: &str,
        hash: &str,
        pending_secs: u64,
    ) -> Result<Begin, CacheError> {
        let marker = Record::Pending {
            hash: hash.to_string(),
            token: uuid::Uuid::now_v7().simple().to_string(),
        };
        let text = serde_json::to_string(&marker)?;
        let mut c = self.cache.conn();
        // A record that expires between the SET and the GET is taken on the next round.
        for _ in 0..3 {
            let taken: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(&text)
                .arg("NX")
                .arg("EX")
                .arg(pending_secs.max(1))
                .query_async(&mut c)
                .await
                .map_err(|e| self.cache.failed("idempotency_begin", e))?;
            if taken.is_some() {
                return Ok(Begin::Taken(marker));
            }
            if let Some(found) = self.get(key).await? {
                return Ok(Begin::Found(found));
            }
        }
        // A key expiring again and again between the two calls: run without a marker;
        // finishing finds the marker not ours and stores nothing.
        Ok(Begin::Taken(marker))
    }

    /// The record of `key`, if any.
    pub async fn get(&self, key: &str) -> Result<Option<Record>, CacheError> {
        let mut c = self.cache.conn();
        let text: Option<String> = c
            .get(key)
            .await
            .map_err(|e| self.cache.failed("idempotency_get", e))?;
        Ok(text.map(|t| serde_json::from_str(&t)).transpose()?)
    }

    /// Replace this request's marker with its answer, kept [`WINDOW_SECS`]; or, without
    /// one, release the key so that a retry runs. False when the marker was no longer ours.
    pub async fn finish(
        &self,
        key: &str,
        marker: &Record,
        answer: Option<StoredAnswer>,
    ) -> Result<bool, CacheError> {
        let mine = serde_json::to_string(marker)?;
        let next = match answer {
            Some(answer) => serde_json::to_string(&Record::Done {
                hash: marker.hash().to_string(),
                answer,
            })?,
            None => String::new(),
        };
        let mut c = self.cache.conn();
        let done: i64 = self
            .finish
            .key(key)
            .arg(mine)
            .arg(next)
            .arg(WINDOW_SECS)
            .invoke_async(&mut c)
            .await
            .map_err(|e| self.cache.failed("idempotency_finish", e))?;
        Ok(done == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_their_json() {
        let done = Record::Done {
            hash: "h".into(),
            answer: StoredAnswer {
                status: 200,
                content_type: Some("application/json".into()),
                run_id: Some("r".into()),
                body: Some("{}".into()),
            },
        };
        let text = serde_json::to_string(&done).unwrap();
        assert!(text.contains(r#""state":"done""#), "{text}");
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), done);
        let pending = Record::Pending {
            hash: "h2".into(),
            token: "t".into(),
        };
        let text = serde_json::to_string(&pending).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), pending);
        assert_eq!(pending.hash(), "h2");
    }
}
