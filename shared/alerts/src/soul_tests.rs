//! The soul cache's invalidation with the real alerts behind it: it lives here because
//! the alerts crate depends on the cache crate, not the other way round.

use std::time::Instant;

use secrecy::SecretString;

use super::Alerts;
use hermes_cache::Cache;
use hermes_cache::soul::{cache_key, invalidate};
use hermes_config::{AlertSettings, Namespace};
use hermes_telemetry::Metrics;
use hermes_types::ids::UserId;
use redis::AsyncCommands;
use std::time::Duration;

fn alerts(cache: &Cache, metrics: &Metrics) -> Alerts {
    let settings = AlertSettings {
        slack_url: None,
        discord_url: None,
        dedupe_window: Duration::from_secs(60),
        parking_threshold: 100,
        approval_wait: Duration::from_secs(300),
    };
    Alerts::new(&settings, cache.clone(), metrics.clone())
}

fn cache(url: &str, metrics: Metrics) -> Cache {
    let ns = Namespace::parse(&format!("soul{:016x}", rand::random::<u64>())).unwrap();
    Cache::new(&SecretString::from(url.to_string()), ns, metrics).unwrap()
}

use hermes_testkit_core::redis_url;

#[tokio::test]
async fn the_key_is_namespaced_and_invalidation_deletes_it() {
    let metrics = Metrics::new();
    let cache = cache(&redis_url(), metrics.clone());
    let alerts = alerts(&cache, &metrics);
    let user = UserId::new();
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
            .process
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
    assert!(!invalidate(&cache, &alerts, UserId::new()).await);
    // Both pauses were taken: three tries, not one.
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert_eq!(
        metrics
            .process
            .alerts
            .with_label_values(&["soul_invalidation_failed"])
            .get(),
        1
    );
}
