//! Rate limits in Redis, shared by every replica. Each limit is one atomic script that reads
//! the server's clock, so replicas with skewed clocks agree. There are two, because the two
//! callers need different answers:
//!
//! - [`RateLimiter::take`] **admits or refuses now** (a token bucket): ingest answers a sender
//!   over its limit with 429 and `Retry-After`, and a refused message must cost nothing, so
//!   nothing is taken when it is refused. It can also check a dedupe key in the same round
//!   trip.
//! - [`RateLimiter::reserve`] **books a slot in the future** (GCRA "theoretical arrival
//!   times"): delivery must send every reply, only spread out, so a send reserves its slot in
//!   several buckets at once (the chat and the bot) and learns how long to wait; only a wait
//!   beyond a bound is refused, and then nothing is reserved.

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

/// KEYS: the buckets. ARGV: interval ms and burst of each bucket in turn, then the longest
/// wait ms. Returns the wait in ms, or -1 if it would exceed the bound (nothing reserved then).
const RESERVE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wait = 0
local tats = {}
for i = 1, #KEYS do
  local interval = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  local new_tat = tat + interval
  local w = new_tat - now - burst * interval
  if w > wait then wait = w end
  tats[i] = new_tat
end
if wait > tonumber(ARGV[2 * #KEYS + 1]) then return -1 end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], tats[i], 'PX', tats[i] - now + 1000)
end
return wait
"#;

/// One bucket of a [`RateLimiter::reserve`]: its key (under the namespace), the time between
/// two sends, and how many may go back to back.
/// Give one token back to a bucket (up to its capacity): the action it paid for did not
/// happen (ingest could not queue the message).
const GIVE_BACK: &str = r"
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens'))
if tokens == nil then return 0 end
tokens = math.min(tonumber(ARGV[1]), tokens + 1)
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens))
return 1
";

#[derive(Clone, Copy, Debug)]
pub struct Pace<'a> {
    pub name: &'a str,
    pub interval: Duration,
    pub burst: u32,
}

/// Token buckets under `{ns}:rl:`, and paced reservations.
#[derive(Clone)]
pub struct RateLimiter {
    cache: Cache,
    script: Script,
    reserve: Script,
    give_back: Script,
}

impl RateLimiter {
    pub fn new(cache: Cache) -> Self {
        Self {
            cache,
            script: Script::new(SCRIPT),
            reserve: Script::new(RESERVE),
            give_back: Script::new(GIVE_BACK),
        }
    }

    /// Reserve the next slot in every bucket of `paces` at once and return how long to wait
    /// for it; `None` (nothing reserved) when that wait would exceed `max_wait`.
    pub async fn reserve(
        &self,
        paces: &[Pace<'_>],
        max_wait: Duration,
    ) -> Result<Option<Duration>, CacheError> {
        let mut invocation = self.reserve.prepare_invoke();
        for pace in paces {
            invocation
                .key(self.cache.key(pace.name))
                .arg(u64::try_from(pace.interval.as_millis()).unwrap_or(u64::MAX))
                .arg(pace.burst);
        }
        invocation.arg(u64::try_from(max_wait.as_millis()).unwrap_or(u64::MAX));
        let mut c = self.cache.conn();
        let wait_ms: i64 = invocation
            .invoke_async(&mut c)
            .await
            .map_err(|e| self.cache.failed("rate_gate", e))?;
        Ok(u64::try_from(wait_ms).ok().map(Duration::from_millis))
    }

    /// Return the token a [`RateLimiter::take`] of `name` took, when what it paid for did
    /// not happen: a refused try must not use up the sender's rate.
    pub async fn give_back(&self, name: &str, limit: RateLimit) -> Result<(), CacheError> {
        let key = self.cache.key(format_args!("rl:{name}"));
        let mut c = self.cache.conn();
        let _: i64 = self
            .give_back
            .key(&key)
            .arg(limit.burst)
            .invoke_async(&mut c)
            .await
            .map_err(|e| self.cache.failed("rate_limit", e))?;
        Ok(())
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
