//! Redis, for what may be lost (docs/architecture.md#5-what-redis-may-lose): one lazily connected, auto-reconnecting
//! multiplexed connection with short timeouts, and keys under the namespace.

mod breaker;
pub mod dedupe;
pub mod history;
pub mod rate_limit;
pub mod run_events;
pub mod soul;

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use secrecy::{ExposeSecret, SecretString};

use hermes_config::Namespace;
use hermes_telemetry::Metrics;

/// How long any single Redis call may take before it counts as failed.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// What can go wrong with Redis. Callers decide per use whether to fail open or closed.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("REDIS_URL is invalid: {0}")]
    Url(#[source] redis::RedisError),
    #[error("REDIS_URL: {0}")]
    Tls(String),
    #[error("redis {op} failed: {source}")]
    Call {
        op: &'static str,
        #[source]
        source: redis::RedisError,
    },
    #[error("stored value is not valid: {0}")]
    Decode(#[from] serde_json::Error),
}

/// The client of `url`. `rediss://` is TLS with rustls (`docs/deploy.md`, "TLS to
/// PostgreSQL and Redis"), verified against the system's roots, or against the PEM file of
/// an `sslrootcert` query parameter (the PostgreSQL spelling, so both URLs read alike).
pub fn client(url: &str) -> Result<redis::Client, CacheError> {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return redis::Client::open(url).map_err(CacheError::Url);
    };
    let mut root = None;
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter_map(|(k, v)| {
            if k == "sslrootcert" {
                root = Some(v.into_owned());
                None
            } else {
                Some((k.into_owned(), v.into_owned()))
            }
        })
        .collect();
    let Some(root) = root else {
        return redis::Client::open(url).map_err(CacheError::Url);
    };
    if parsed.scheme() != "rediss" {
        return Err(CacheError::Tls(
            "sslrootcert is given but the scheme is not rediss://".into(),
        ));
    }
    if kept.is_empty() {
        parsed.set_query(None);
    } else {
        parsed.query_pairs_mut().clear().extend_pairs(kept);
    }
    let pem =
        std::fs::read(&root).map_err(|e| CacheError::Tls(format!("sslrootcert={root}: {e}")))?;
    let certs = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem),
    };
    redis::Client::build_with_tls(parsed.as_str(), certs).map_err(CacheError::Url)
}

/// A handle on Redis, cheap to clone.
#[derive(Clone)]
pub struct Cache {
    client: redis::Client,
    conn: ConnectionManager,
    ns: Namespace,
    metrics: Metrics,
    /// The HMAC key of [`Cache::opaque`]: `HERMES_CACHE_KEY_SECRET`, else the namespace.
    id_key: std::sync::Arc<[u8]>,
}

impl Cache {
    /// Build the handle without connecting: Redis being down at start is not fatal.
    pub fn new(url: &SecretString, ns: Namespace, metrics: Metrics) -> Result<Self, CacheError> {
        let client = client(url.expose_secret())?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CALL_TIMEOUT))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(CacheError::Url)?;
        let id_key = ns.as_str().as_bytes().into();
        Ok(Self {
            client,
            conn,
            ns,
            metrics,
            id_key,
        })
    }

    /// Hash identifiers with `secret` (`HERMES_CACHE_KEY_SECRET`) rather than with the
    /// namespace, so that knowing the namespace is not enough to test a guessed number
    /// against the key names.
    pub fn with_id_secret(mut self, secret: Option<&SecretString>) -> Self {
        if let Some(secret) = secret {
            self.id_key = secret.expose_secret().as_bytes().into();
        }
        self
    }

    /// The form a platform identifier (a phone number, a chat, sender or message id) takes
    /// in a key name: 128 bits of an HMAC-SHA256, in hex. The same identifier always maps to
    /// the same name, and the name does not show it (docs/security.md, "Conversations and
    /// tools"): Redis key names appear in `MONITOR`, `SCAN`, slow logs and memory reports.
    pub fn opaque(&self, id: &str) -> String {
        let mac = hermes_net::signing::hmac_sha256(&self.id_key, &[id.as_bytes()]);
        hex::encode(&mac[..16])
    }

    /// `{ns}:{suffix}`.
    pub fn key(&self, suffix: impl std::fmt::Display) -> String {
        format!("{}:{}", self.ns, suffix)
    }

    /// A clone of the multiplexed connection.
    pub fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// The client, for dedicated connections (pub/sub).
    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    /// Record a failed call in the metrics and wrap it.
    pub fn failed(&self, op: &'static str, source: redis::RedisError) -> CacheError {
        self.metrics
            .process
            .redis_errors
            .with_label_values(&[op])
            .inc();
        CacheError::Call { op, source }
    }

    pub async fn ping(&self) -> Result<(), CacheError> {
        let mut c = self.conn();
        redis::cmd("PING")
            .query_async::<String>(&mut c)
            .await
            .map_err(|e| self.failed("ping", e))?;
        Ok(())
    }
}
