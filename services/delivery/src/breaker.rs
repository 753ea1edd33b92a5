//! The per-platform circuit breaker (docs/channels.md, "Circuit breakers"), kept in Redis so every
//! delivery replica sees the same state: `threshold` consecutive failed sends within a
//! sliding `window` open it for `open_for`; while open, sends to that platform are not
//! attempted (they go to the queued retry as `breaker_open`); the first success closes it.
//! Each transition is one Lua script, so two replicas failing at once count both failures
//! and open it once. Redis down reads as closed (docs/architecture.md#5-what-redis-may-lose): sends are attempted.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hermes_alerts::{AlertKind, Alerts};
use hermes_cache::Cache;
use hermes_config::BreakerSettings;
use hermes_telemetry::Metrics;
use hermes_types::model::Platform;
use redis::Script;

/// Records a failure; opens the breaker when the window holds `threshold` of them.
/// KEYS: failures (sorted set of timestamps), open flag. ARGV: now ms, window ms,
/// threshold, open-for ms, a unique member. Returns the reset time (ms) if this call
/// opened it, 0 otherwise.
const FAIL: &str = r#"
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local now = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local reset = now + tonumber(ARGV[4])
  redis.call('SET', KEYS[2], reset, 'PX', ARGV[4])
  redis.call('DEL', KEYS[1])
  return reset
end
return 0
"#;

/// Records a success: the run of failures ends and an open breaker closes. Returns 1 if
/// it was open.
const SUCCEED: &str = r#"
redis.call('DEL', KEYS[1])
return redis.call('DEL', KEYS[2])
"#;

/// The breakers of every platform.
#[derive(Clone)]
pub struct Breakers {
    cache: Cache,
    settings: BreakerSettings,
    metrics: Metrics,
    alerts: Alerts,
}

impl Breakers {
    pub fn new(cache: Cache, settings: BreakerSettings, metrics: Metrics, alerts: Alerts) -> Self {
        // Every platform's series exists from the start, so a dashboard shows 0, not nothing.
        for p in Platform::ALL {
            metrics
                .delivery
                .breaker_open
                .with_label_values(&[p.as_str()])
                .set(0);
        }
        Self {
            cache,
            settings,
            metrics,
            alerts,
        }
    }

    fn keys(&self, platform: Platform) -> [String; 2] {
        self.cache.breaker_keys(platform)
    }

    fn gauge(&self, platform: Platform, open: bool) {
        self.metrics
            .delivery
            .breaker_open
            .with_label_values(&[platform.as_str()])
            .set(i64::from(open));
    }

    /// When the platform's open breaker resets; `None` when closed (or Redis cannot say).
    pub async fn open_until(&self, platform: Platform) -> Option<DateTime<Utc>> {
        // A failed read is counted by the cache and reads as closed.
        let value = self
            .cache
            .breaker_open_until_ms(platform)
            .await
            .unwrap_or(None);
        let until = value.and_then(DateTime::from_timestamp_millis);
        self.gauge(platform, until.is_some());
        until
    }

    /// A send to `platform` failed (after its in-call retries).
    pub async fn record_failure(&self, platform: Platform) {
        self.record_failure_at(platform, Utc::now()).await;
    }

    /// [`Breakers::record_failure`] as of `at`: the window slides over these instants, so a
    /// test can place failures in and out of it without waiting for it to pass.
    async fn record_failure_at(&self, platform: Platform, at: DateTime<Utc>) {
        let [failures, open] = self.keys(platform);
        let now = at.timestamp_millis();
        let mut c = self.cache.conn();
        let opened: Result<i64, _> = Script::new(FAIL)
            .key(&failures)
            .key(&open)
            .arg(now)
            .arg(millis(self.settings.window))
            .arg(self.settings.threshold)
            .arg(millis(self.settings.open_for))
            .arg(uuid_member())
            .invoke_async(&mut c)
            .await;
        match opened {
            Ok(0) => {}
            Ok(reset_ms) => {
                self.gauge(platform, true);
                let reset = DateTime::from_timestamp_millis(reset_ms).unwrap_or_else(Utc::now);
                tracing::warn!(
                    platform = platform.as_str(),
                    reset_at = %reset.to_rfc3339(),
                    failures = self.settings.threshold,
                    "circuit breaker opened: sends to this platform are skipped until it resets"
                );
                self.alerts.raise(
                    AlertKind::BreakerOpen,
                    platform.as_str(),
                    format!(
                        "{} sends failed {} times in a row: breaker open until {}",
                        platform.as_str(),
                        self.settings.threshold,
                        reset.to_rfc3339()
                    ),
                );
            }
            Err(e) => {
                let _ = self.cache.failed("breaker_write", e);
            }
        }
    }

    /// A send to `platform` succeeded: the failure run ends and an open breaker closes.
    pub async fn record_success(&self, platform: Platform) {
        let [failures, open] = self.keys(platform);
        let mut c = self.cache.conn();
        let closed: Result<i64, _> = Script::new(SUCCEED)
            .key(&failures)
            .key(&open)
            .invoke_async(&mut c)
            .await;
        match closed {
            Ok(n) => {
                if n > 0 {
                    tracing::info!(
                        platform = platform.as_str(),
                        "circuit breaker closed by a successful send"
                    );
                }
                self.gauge(platform, false);
            }
            Err(e) => {
                let _ = self.cache.failed("breaker_write", e);
            }
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn uuid_member() -> String {
    uuid::Uuid::now_v7().to_string()
}

#[cfg(test)]
mod tests {
    use hermes_config::{AlertSettings, Namespace};
    use secrecy::SecretString;

    use super::*;

    fn breakers(redis: &str, ns: &str, settings: BreakerSettings) -> (Breakers, Metrics) {
        alerting_breakers(redis, ns, settings, None)
    }

    /// [`breakers`] whose alerts go to the Slack webhook `slack_url`.
    fn alerting_breakers(
        redis: &str,
        ns: &str,
        settings: BreakerSettings,
        slack_url: Option<String>,
    ) -> (Breakers, Metrics) {
        let metrics = Metrics::new();
        let cache = Cache::new(
            &SecretString::from(redis.to_string()),
            Namespace::parse(ns).unwrap(),
            metrics.clone(),
        )
        .unwrap();
        let alerts = Alerts::new(
            &AlertSettings {
                slack_url: slack_url.map(SecretString::from),
                discord_url: None,
                dedupe_window: Duration::from_secs(60),
                parking_threshold: 100,
                approval_wait: Duration::from_secs(300),
            },
            cache.clone(),
            metrics.clone(),
        );
        (
            Breakers::new(cache, settings, metrics.clone(), alerts),
            metrics,
        )
    }

    use hermes_testkit_core::redis_url;

    fn ns() -> String {
        format!("brk{:016x}", rand::random::<u64>())
    }

    const SETTINGS: BreakerSettings = BreakerSettings {
        threshold: 3,
        window: Duration::from_secs(60),
        open_for: Duration::from_secs(60),
    };

    #[tokio::test]
    async fn consecutive_failures_open_it_and_a_success_closes_it_for_every_replica() {
        let ns = ns();
        let (a, metrics_a) = breakers(&redis_url(), &ns, SETTINGS);
        let (b, _) = breakers(&redis_url(), &ns, SETTINGS);
        let tg = Platform::Telegram;
        assert_eq!(
            metrics_a
                .delivery
                .breaker_open
                .with_label_values(&["whatsapp"])
                .get(),
            0,
            "every platform's gauge starts at 0"
        );
        a.record_failure(tg).await;
        b.record_failure(tg).await;
        // A success in between starts the count again.
        a.record_success(tg).await;
        a.record_failure(tg).await;
        b.record_failure(tg).await;
        assert!(a.open_until(tg).await.is_none());
        b.record_failure(tg).await;
        let until = a
            .open_until(tg)
            .await
            .expect("open, as seen by the other replica");
        assert!(until > Utc::now() + chrono::Duration::seconds(50));
        assert_eq!(
            metrics_a
                .delivery
                .breaker_open
                .with_label_values(&["telegram"])
                .get(),
            1
        );
        assert!(
            a.open_until(Platform::Whatsapp).await.is_none(),
            "per platform"
        );
        b.record_success(tg).await;
        assert!(a.open_until(tg).await.is_none());
        assert_eq!(
            metrics_a
                .delivery
                .breaker_open
                .with_label_values(&["telegram"])
                .get(),
            0
        );
    }

    #[tokio::test]
    async fn failures_outside_the_window_do_not_count() {
        let settings = BreakerSettings {
            window: Duration::from_millis(200),
            ..SETTINGS
        };
        let (a, _) = breakers(&redis_url(), &ns(), settings);
        let ig = Platform::Instagram;
        let t0 = Utc::now();
        a.record_failure_at(ig, t0).await;
        a.record_failure_at(ig, t0).await;
        // The third comes after the window has slid past the first two.
        a.record_failure_at(ig, t0 + chrono::Duration::milliseconds(300))
            .await;
        assert!(a.open_until(ig).await.is_none());
        // Three within the window open it (the threshold is three).
        let t1 = t0 + chrono::Duration::milliseconds(400);
        a.record_failure_at(ig, t1).await;
        a.record_failure_at(ig, t1).await;
        assert!(a.open_until(ig).await.is_some());
    }

    #[tokio::test]
    async fn redis_down_reads_as_closed() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (a, _) = breakers(&format!("redis://127.0.0.1:{port}"), &ns(), SETTINGS);
        for _ in 0..5 {
            a.record_failure(Platform::Telegram).await;
        }
        assert!(a.open_until(Platform::Telegram).await.is_none());
    }

    /// The breaker's opening is what ops are paged for: it reaches the alert sender once,
    /// naming the platform, and the failures before the threshold page nobody.
    #[tokio::test]
    async fn an_opening_breaker_pages_ops_once() {
        use wiremock::matchers::{method, path};
        use wiremock::{Mock, MockServer, ResponseTemplate};

        hermes_net::install_crypto_provider();
        let slack = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/ops"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&slack)
            .await;
        let url = format!("{}/ops", slack.uri());
        let (a, metrics) = alerting_breakers(&redis_url(), &ns(), SETTINGS, Some(url));
        let tg = Platform::Telegram;
        a.record_failure(tg).await;
        a.record_failure(tg).await;
        let paged = || async { slack.received_requests().await.unwrap_or_default() };
        assert!(
            paged().await.is_empty(),
            "below the threshold nobody is paged"
        );
        a.record_failure(tg).await;
        a.record_failure(tg).await;
        let requests = hermes_testkit_core::eventually(
            Duration::from_secs(10),
            "a page reaching ops",
            || async {
                let requests = paged().await;
                (!requests.is_empty()).then_some(requests)
            },
        )
        .await;
        let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
        let text = body["text"].as_str().unwrap();
        assert!(
            text.contains("breaker_open") && text.contains("telegram sends failed 3 times"),
            "{text}"
        );
        assert_eq!(
            metrics
                .process
                .alerts
                .with_label_values(&["breaker_open"])
                .get(),
            1,
            "one opening, one alert"
        );
    }
}
