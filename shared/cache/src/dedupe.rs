//! Inbound dedupe: a platform message id seen in the last 24 hours is not routed again.
//! The check itself runs inside the rate limiter's script (one round trip per message).
//! This is the fast check; the router's unique index on (platform, message id) is the
//! durable guarantee, so losing Redis costs only a wasted publish, never a double answer.

use redis::AsyncCommands;

use super::{Cache, CacheError};
use hermes_types::model::Platform;

/// How long a message id is remembered.
pub const WINDOW_SECS: u64 = 24 * 3600;

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

    /// Remember an accepted message (after the broker confirmed it).
    pub async fn remember(&self, platform: Platform, id: &str) -> Result<(), CacheError> {
        let mut c = self.cache.conn();
        c.set_ex::<_, _, ()>(self.key(platform, id), 1, WINDOW_SECS)
            .await
            .map_err(|e| self.cache.failed("dedupe_remember", e))
    }
}
