//! Token buckets in Redis, shared by every replica: per-sender inbound limits in ingest and
//! (later) per-chat outbound gates in delivery. The bucket lives in one hash and is updated
//! atomically by a script that reads the server's clock, so replicas with skewed clocks
//! agree.

use std::time::Duration;

use redis::Script;

use super::{Cache, CacheError};
use hermes_config::RateLimit;

/// The verdict of one take from a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// The dedupe key given to [`RateLimiter::take_unless_seen`] exists: nothing was taken.
    Seen,
    /// Over the limit; a token will be available after this long.
    Limited {
        retry_after: Duration,
    },
}

/// The bucket: KEYS[1], ARGV[1] burst, ARGV[2] tokens per ms; returns the wait in ms (0: taken).
/// When ARGV[3] is "1", KEYS[2] is a dedupe key checked first: -1 if it exists (nothing taken),
/// so ingest's dedupe check and rate limit cost one round trip.
const SCRIPT: &str = r"
if ARGV[3] == '1' and redis.call('EXISTS', KEYS[2]) == 1 then
  return -1
end
local cap = tonumber(ARGV[1])
local per_ms = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil or ts == nil then
  tokens = cap
  ts = now
end
tokens = math.min(cap, tokens + math.max(0, now - ts) * per_ms)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.ceil((1 - tokens) / per_ms)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(cap / per_ms) + 1000)
return wait
";

/// Token buckets under `{ns}:rl:`.
#[derive(Clone)]
pub struct RateLimiter {
    cache: Cache,
    script: Script,
}

impl RateLimiter {
    pub fn new(cache: Cache) -> Self {
        Self {
            cache,
            script: Script::new(SCRIPT),
        }
    }

    /// Take one token from the bucket `name` with `limit`.
    pub async fn take(&self, name: &str, limit: RateLimit) -> Result<Verdict, CacheError> {
        self.take_unless_seen(name, limit, None).await
    }

    /// Like [`take`](Self::take), but first check `seen_key` (a full key, e.g. from
    /// [`Dedupe::key`](super::dedupe::Dedupe::key)): if it exists, take nothing and answer `Seen`.
    pub async fn take_unless_seen(
        &self,
        name: &str,
        limit: RateLimit,
        seen_key: Option<&str>,
    ) -> Result<Verdict, CacheError> {
        let per_ms = f64::from(limit.per_minute) / 60_000.0;
        let key = self.cache.key(format_args!("rl:{name}"));
        let mut invocation = self.script.prepare_invoke();
        invocation.key(&key).arg(limit.burst).arg(per_ms);
        match seen_key {
            Some(seen) => invocation.key(seen).arg("1"),
            None => invocation.key(&key).arg("0"),
        };
        let mut c = self.cache.conn();
        let wait_ms: i64 = invocation
            .invoke_async(&mut c)
            .await
            .map_err(|e| self.cache.failed("rate_limit", e))?;
        Ok(match wait_ms {
            i64::MIN..=-1 => Verdict::Seen,
            0 => Verdict::Allowed,
            ms => Verdict::Limited {
                retry_after: Duration::from_millis(ms as u64),
            },
        })
    }
}
