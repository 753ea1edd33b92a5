//! Token buckets in Redis, shared by every replica: per-sender inbound limits in ingest and
//! (later) per-chat outbound gates in delivery. The bucket lives in one hash and is updated
//! atomically by a script that reads the server's clock, so replicas with skewed clocks
//! agree.

use std::time::Duration;

use redis::Script;

use super::{Cache, CacheError};
use crate::config::RateLimit;

/// The verdict of one take from a bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Over the limit; a token will be available after this long.
    Limited {
        retry_after: Duration,
    },
}

const SCRIPT: &str = r"
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
        let per_ms = f64::from(limit.per_minute) / 60_000.0;
        let key = self.cache.key(format_args!("rl:{name}"));
        let mut c = self.cache.conn();
        let wait_ms: i64 = self
            .script
            .key(key)
            .arg(limit.burst)
            .arg(per_ms)
            .invoke_async(&mut c)
            .await
            .map_err(|e| self.cache.failed("rate_limit", e))?;
        Ok(if wait_ms <= 0 {
            Verdict::Allowed
        } else {
            Verdict::Limited {
                retry_after: Duration::from_millis(wait_ms as u64),
            }
        })
    }
}
