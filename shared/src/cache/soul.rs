//! The soul cache (seed 001, "Soul loading"): the router caches each user's base system
//! prompt as `soul:{user_id}:base` for [`SOUL_TTL`]; whoever changes what the base is
//! built from (the router, the CLI, the llm stage's memory extraction) drops it with
//! [`invalidate`]. It lives here, not in the router, so stages that must not depend on
//! the router crate can invalidate too.

use std::time::Duration;

use redis::AsyncCommands;
use uuid::Uuid;

use super::Cache;
use crate::alerts::{AlertKind, Alerts};

/// How long a cached base prompt may serve (seed: `SOUL_TTL = 3600`); also how long a
/// stale soul can serve when [`invalidate`] fails.
pub const SOUL_TTL: Duration = Duration::from_secs(3600);
/// Pauses between the tries of an invalidation (three tries in all, seed 001).
const INVALIDATE_BACKOFF: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(1000)];

/// The Redis key of a user's cached base prompt.
pub fn cache_key(cache: &Cache, user_id: Uuid) -> String {
    cache.key(format!("soul:{user_id}:base"))
}

/// Drop the user's cached base after their memory or profile changed: three tries with
/// 0.5 s and 1 s pauses; when all fail, alert ops (a stale soul serves for up to
/// [`SOUL_TTL`]). Returns whether the key is gone (a key that was not cached counts).
pub async fn invalidate(cache: &Cache, alerts: &Alerts, user_id: Uuid) -> bool {
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
    alerts
        .send(
            AlertKind::SoulInvalidationFailed,
            &user_id.to_string(),
            &format!(
                "soul cache invalidation of user {user_id} failed 3 times ({error}): a stale soul may serve for up to {} s",
                SOUL_TTL.as_secs()
            ),
        )
        .await;
    false
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use secrecy::SecretString;

    use super::*;
    use crate::config::{AlertSettings, Namespace};
    use crate::telemetry::Metrics;

    fn alerts(cache: &Cache, metrics: &Metrics) -> Alerts {
        let settings = AlertSettings {
            slack_url: None,
            discord_url: None,
            dedupe_window: Duration::from_secs(60),
            parking_threshold: 100,
        };
        Alerts::new(&settings, cache.clone(), metrics.clone())
    }

    fn cache(url: &str, metrics: Metrics) -> Cache {
        let ns = Namespace::parse(&format!("soul{:016x}", rand::random::<u64>())).unwrap();
        Cache::new(&SecretString::from(url.to_string()), ns, metrics).unwrap()
    }

    fn redis_url() -> String {
        std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
    }

    #[tokio::test]
    async fn the_key_is_namespaced_and_invalidation_deletes_it() {
        let metrics = Metrics::new();
        let cache = cache(&redis_url(), metrics.clone());
        let alerts = alerts(&cache, &metrics);
        let user = Uuid::now_v7();
        let key = cache_key(&cache, user);
        assert_eq!(key, cache.key(format!("soul:{user}:base")));

        let mut conn = cache.conn();
        let () = conn.set_ex(&key, "base prompt", 60).await.unwrap();
        assert!(invalidate(&cache, &alerts, user).await);
        let left: Option<String> = conn.get(&key).await.unwrap();
        assert_eq!(left, None);
        // Nothing cached is already invalidated.
        assert!(invalidate(&cache, &alerts, user).await);
        assert_eq!(
            metrics
                .alerts
                .with_label_values(&["soul_invalidation_failed"])
                .get(),
            0
        );
    }

    #[tokio::test]
    async fn redis_down_retries_then_alerts() {
        // Bind then drop: the port is very likely free and refuses connections.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let metrics = Metrics::new();
        let cache = cache(&format!("redis://127.0.0.1:{port}"), metrics.clone());
        let alerts = alerts(&cache, &metrics);
        let started = Instant::now();
        assert!(!invalidate(&cache, &alerts, Uuid::now_v7()).await);
        // Both pauses were taken: three tries, not one.
        assert!(started.elapsed() >= Duration::from_millis(1500));
        assert_eq!(
            metrics
                .alerts
                .with_label_values(&["soul_invalidation_failed"])
                .get(),
            1
        );
    }
}
