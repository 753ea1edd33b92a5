//! Inbound dedupe: a platform message id seen in the last 24 hours is not routed again.
//! The check itself runs inside the rate limiter's script (one round trip per message).
//! This is the fast check; the router's unique index on (platform, key, message id) is the
//! durable guarantee, so losing Redis costs only a wasted publish, never a double answer.
//!
//! Each remembered id holds the run it was accepted as, so a caller repeating a message can
//! be told which run answers it. The REST channel, whose ids are its callers' own, claims
//! the id before it publishes (so two copies sent at once make one run) and scopes it by
//! the key that sent it (docs/api.md, idempotency).

use redis::AsyncCommands;

use super::{Cache, CacheError};
use hermes_types::ids::RunId;
use hermes_types::model::Platform;

/// How long a message id is remembered.
pub const WINDOW_SECS: u64 = 24 * 3600;

/// What a claim of a message id found.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// The id is now this message's.
    Claimed,
    /// Another copy holds it, as this run (`None`: remembered without its run).
    Held(Option<RunId>),
}

#[derive(Clone)]
pub struct Dedupe {
    cache: Cache,
}

impl Dedupe {
    pub fn new(cache: Cache) -> Self {
        Self { cache }
    }

    /// The Redis key remembering `id` (for a combined check, see `RateLimiter::take_unless_seen`).
    /// The id is hashed: a WhatsApp message id carries the sender's number.
    pub fn key(&self, platform: Platform, id: &str) -> String {
        self.cache.key(format_args!(
            "dedupe:{}:{}",
            platform.as_str(),
            self.cache.opaque(id)
        ))
    }

    /// Remember an accepted message as `run` (after the broker confirmed it).
    pub async fn remember(
        &self,
        platform: Platform,
        id: &str,
        run: RunId,
    ) -> Result<(), CacheError> {
        let mut c = self.cache.conn();
        c.set_ex::<_, _, ()>(self.key(platform, id), run.to_string(), WINDOW_SECS)
            .await
            .map_err(|e| self.cache.failed("dedupe_remember", e))
    }

    /// Take `id` for `run` unless another copy holds it already.
    pub async fn claim(
        &self,
        platform: Platform,
        id: &str,
        run: RunId,
    ) -> Result<Claim, CacheError> {
        let mut c = self.cache.conn();
        let key = self.key(platform, id);
        let taken: bool = redis::cmd("SET")
            .arg(&key)
            .arg(run.to_string())
            .arg("NX")
            .arg("EX")
            .arg(WINDOW_SECS)
            .query_async::<Option<String>>(&mut c)
            .await
            .map_err(|e| self.cache.failed("dedupe_claim", e))?
            .is_some();
        if taken {
            return Ok(Claim::Claimed);
        }
        Ok(Claim::Held(self.run_of(platform, id).await?))
    }

    /// The run a remembered `id` was accepted as.
    pub async fn run_of(&self, platform: Platform, id: &str) -> Result<Option<RunId>, CacheError> {
        let mut c = self.cache.conn();
        let held: Option<String> = c
            .get(self.key(platform, id))
            .await
            .map_err(|e| self.cache.failed("dedupe_get", e))?;
        Ok(held.and_then(|v| v.parse().ok()))
    }

    /// Give up a claim whose message the broker did not take, so a retry is not a duplicate.
    pub async fn forget(&self, platform: Platform, id: &str) -> Result<(), CacheError> {
        let mut c = self.cache.conn();
        c.del::<_, ()>(self.key(platform, id))
            .await
            .map_err(|e| self.cache.failed("dedupe_forget", e))
    }
}
