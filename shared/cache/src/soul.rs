//! The soul cache (docs/models-and-budgets.md, the routing pipeline): the router caches each user's base system
//! prompt as `soul:{user_id}:base` for [`SOUL_TTL`]; whoever changes what the base is
//! built from (the router, the CLI, the llm stage's memory extraction) drops it with
//! [`invalidate`]. It lives here, not in the router, so stages that must not depend on
//! the router crate can invalidate too.

use hermes_types::ids::UserId;
use std::time::Duration;

use redis::AsyncCommands;

use super::Cache;

/// Who is told when an invalidation failed every try (the alerts crate's `Alerts`, which
/// depends on this crate, implements it).
pub trait StaleSoulAlarm {
    /// Raise the alarm: `user_id`'s stale soul may serve for up to [`SOUL_TTL`].
    fn soul_stale(&self, user_id: UserId, error: &str) -> impl Future<Output = ()> + Send;
}

/// How long a cached base prompt may serve (seed: `SOUL_TTL = 3600`); also how long a
/// stale soul can serve when [`invalidate`] fails.
pub const SOUL_TTL: Duration = Duration::from_secs(3600);
/// Pauses between the tries of an invalidation (three tries in all, docs/models-and-budgets.md).
const INVALIDATE_BACKOFF: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(1000)];

/// The Redis key of a user's cached base prompt.
pub fn cache_key(cache: &Cache, user_id: UserId) -> String {
    cache.key(format!("soul:{user_id}:base"))
}

/// Drop the user's cached base after their memory or profile changed: three tries with
/// 0.5 s and 1 s pauses; when all fail, alert ops (a stale soul serves for up to
/// [`SOUL_TTL`]). Returns whether the key is gone (a key that was not cached counts).
pub async fn invalidate(cache: &Cache, alerts: &impl StaleSoulAlarm, user_id: UserId) -> bool {
    let key = cache_key(cache, user_id);
    let mut last_error = None;
    for attempt in 0..=INVALIDATE_BACKOFF.len() {
        if attempt > 0 {
            tokio::time::sleep(INVALIDATE_BACKOFF[attempt - 1]).await;
        }
        let mut conn = cache.conn();
        match conn.del::<_, i64>(&key).await {
            Ok(_) => return true,
            Err(e) => last_error = Some(cache.failed("soul_invalidate", e)),
        }
    }
    let error = last_error.map(|e| e.to_string()).unwrap_or_default();
    alerts.soul_stale(user_id, &error).await;
    false
}
