//! Ops alerts (docs/operations.md, "Ops alerts"): conditions that need a person are posted to Slack
//! and/or Discord incoming webhooks, fire-and-forget with a short timeout, at most once per
//! kind and subject per dedupe window across every replica (a Redis `SET NX`), and counted
//! in `hermes_alerts_total{kind}` whether or not a webhook is configured. Redis down means
//! the alert is sent anyway: a duplicate page beats a silent one.

use hermes_types::ids::UserId;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use hermes_cache::Cache;
use hermes_cache::soul::{SOUL_TTL, StaleSoulAlarm};
use hermes_config::AlertSettings;
pub use hermes_telemetry::AlertKind;
use hermes_telemetry::Metrics;

/// How long one webhook post may take.
const POST_TIMEOUT: Duration = Duration::from_secs(5);

/// What became of one alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivered {
    /// Posted to this many webhooks (0 when none is configured: logged only).
    Posted(usize),
    /// The same kind and subject was raised within the dedupe window.
    Deduplicated,
}

/// Raises alerts. Cheap to clone.
#[derive(Clone)]
pub struct Alerts {
    http: reqwest::Client,
    slack: Option<SecretString>,
    discord: Option<SecretString>,
    window: Duration,
    cache: Cache,
    metrics: Metrics,
}

impl Alerts {
    pub fn new(settings: &AlertSettings, cache: Cache, metrics: Metrics) -> Self {
        let http = hermes_net::http::client_builder(hermes_net::http::USER_AGENT)
            .timeout(POST_TIMEOUT)
            .build()
            .expect("a TLS backend is installed");
        Self {
            http,
            slack: settings.slack_url.clone(),
            discord: settings.discord_url.clone(),
            window: settings.dedupe_window,
            cache,
            metrics,
        }
    }

    /// The metrics alerts are counted in.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Raise an alert without waiting for it to be posted.
    pub fn raise(&self, kind: AlertKind, subject: &str, text: impl Into<String>) {
        let this = self.clone();
        let subject = subject.to_string();
        let text = text.into();
        tokio::spawn(async move {
            this.send(kind, &subject, &text).await;
        });
    }

    /// Raise an alert and wait until it is posted (for short-lived processes: the CLI).
    pub async fn send(&self, kind: AlertKind, subject: &str, text: &str) -> Delivered {
        self.metrics
            .process
            .alerts
            .with_label_values(&[kind.as_str()])
            .inc();
        tracing::error!(alert = true, kind = kind.as_str(), subject, "{text}");
        if !self.first_in_window(kind, subject).await {
            return Delivered::Deduplicated;
        }
        let line = format!("[hermes] {kind}: {text}");
        let mut posted = 0;
        for (target, url, body) in [
            ("slack", &self.slack, json!({ "text": line })),
            ("discord", &self.discord, json!({ "content": line })),
        ] {
            let Some(url) = url else { continue };
            match self.http.post(url.expose_secret()).json(&body).send().await {
                Ok(r) if r.status().is_success() => posted += 1,
                Ok(r) => {
                    tracing::warn!(target, status = %r.status(), "alert webhook refused the alert")
                }
                Err(e) => {
                    tracing::warn!(target, error = %e.without_url(), "alert webhook unreachable")
                }
            }
        }
        Delivered::Posted(posted)
    }

    /// Whether this is the first alert of its kind and subject in the window (true when
    /// Redis cannot say).
    async fn first_in_window(&self, kind: AlertKind, subject: &str) -> bool {
        let key = self.cache.key(format!("alert:{kind}:{subject}"));
        let mut c = self.cache.conn();
        let set: Result<Option<String>, _> = redis::cmd("SET")
            .arg(&key)
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(self.window.as_millis() as u64)
            .query_async(&mut c)
            .await;
        match set {
            Ok(reply) => reply.is_some(),
            Err(e) => {
                let _ = self.cache.failed("alert_dedupe", e);
                true
            }
        }
    }
}

impl StaleSoulAlarm for Alerts {
    async fn soul_stale(&self, user_id: UserId, error: &str) {
        self.send(
            AlertKind::SoulInvalidationFailed,
            &user_id.to_string(),
            &format!(
                "soul cache invalidation of user {user_id} failed 3 times ({error}): a stale soul may serve for up to {} s",
                SOUL_TTL.as_secs()
            ),
        )
        .await;
    }
}

#[cfg(test)]
mod soul_tests;

#[cfg(test)]
mod tests {
    use wiremock::matchers::{body_partial_json, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use hermes_config::Namespace;

    fn cache(url: &str, metrics: Metrics) -> Cache {
        let ns = Namespace::parse(&format!("alert{:016x}", rand::random::<u64>())).unwrap();
        Cache::new(&SecretString::from(url.to_string()), ns, metrics).unwrap()
    }

    use hermes_testkit_core::redis_url;

    fn settings(server: &MockServer) -> AlertSettings {
        AlertSettings {
            slack_url: Some(format!("{}/slack", server.uri()).into()),
            discord_url: Some(format!("{}/discord", server.uri()).into()),
            dedupe_window: Duration::from_secs(60),
            parking_threshold: 100,
            approval_wait: Duration::from_secs(300),
        }
    }

    #[tokio::test]
    async fn an_alert_reaches_slack_and_discord_once_per_window() {
        hermes_net::install_crypto_provider();
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/slack"))
            .and(body_partial_json(
                json!({"text": "[hermes] breaker_open: telegram is down"}),
            ))
            .respond_with(ResponseTemplate::new(200))
            .expect(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/discord"))
            .and(body_partial_json(
                json!({"content": "[hermes] breaker_open: telegram is down"}),
            ))
            .respond_with(ResponseTemplate::new(204))
            .expect(1)
            .mount(&server)
            .await;
        let metrics = Metrics::new();
        let alerts = Alerts::new(
            &settings(&server),
            cache(&redis_url(), metrics.clone()),
            metrics.clone(),
        );
        let k = AlertKind::BreakerOpen;
        assert_eq!(
            alerts.send(k, "telegram", "telegram is down").await,
            Delivered::Posted(2)
        );
        assert_eq!(
            alerts.send(k, "telegram", "telegram is down").await,
            Delivered::Deduplicated
        );
        // Another subject of the same kind is its own alert.
        let other = alerts.send(k, "whatsapp", "whatsapp is down").await;
        assert_eq!(
            other,
            Delivered::Posted(0),
            "the mocks only accept the telegram text"
        );
        assert_eq!(
            metrics
                .process
                .alerts
                .with_label_values(&["breaker_open"])
                .get(),
            3
        );
        server.verify().await;
    }

    #[tokio::test]
    async fn redis_down_still_alerts() {
        hermes_net::install_crypto_provider();
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200))
            .mount(&server)
            .await;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let metrics = Metrics::new();
        let alerts = Alerts::new(
            &settings(&server),
            cache(&format!("redis://127.0.0.1:{port}"), metrics.clone()),
            metrics,
        );
        for _ in 0..2 {
            assert_eq!(
                alerts.send(AlertKind::KillswitchOn, "", "on").await,
                Delivered::Posted(2)
            );
        }
    }
}
