//! The runtime context every service's `run(ctx)` receives: configuration and handles on
//! PostgreSQL, RabbitMQ and Redis, the metrics, readiness, and the service's stop signal.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::admin::Readiness;
use crate::outages::Outages;
use crate::shutdown::Fatal;
use hermes_alerts::Alerts;
use hermes_bus::{Bus, Names};
use hermes_cache::Cache;
use hermes_config::Config;
use hermes_db::Db;
use hermes_db::event_hub::EventHub;
use hermes_telemetry::Metrics;

/// The services' pool: every session bounded by the configured statement and idle timeouts.
fn service_pool(config: &Config) -> Result<Db, hermes_db::DbError> {
    Db::with_limits(
        &config.database_url,
        config.db_pool_size,
        Some(hermes_db::SessionLimits {
            statement: config.db_statement_timeout,
            idle_in_transaction: config.db_idle_in_tx_timeout,
        }),
    )
}

/// Handles shared by the services of one process. Cheap to clone.
#[derive(Clone)]
pub struct Ctx {
    pub config: Arc<Config>,
    pub db: Db,
    pub bus: Bus,
    pub cache: Cache,
    pub metrics: Metrics,
    /// Ops alerts (Slack / Discord), deduplicated through `cache`.
    pub alerts: Alerts,
    pub readiness: Readiness,
    pub fatal: Fatal,
    /// Which dependencies are down; stages hold their messages while one is.
    pub outages: Outages,
    /// Cancelled when this service must stop taking new work.
    pub stop: CancellationToken,
    /// The process's listener on the operator event log, started by the first
    /// [`Ctx::event_hub`] (only processes that serve operators' MCP clients listen).
    events: Arc<OnceLock<EventHub>>,
}

impl Ctx {
    /// Connect to everything a service needs and check the schema version.
    ///
    /// The broker is retried for up to `HERMES_BUS_RECONNECT_SECS` (it may start after us
    /// in compose or Kubernetes); a schema older than this build stops the process.
    pub async fn connect(config: Config, metrics: Metrics) -> anyhow::Result<Self> {
        let db = service_pool(&config)?;
        db.check_schema().await.context("PostgreSQL")?;
        let names = Names::new(config.namespace.clone());
        let started = Instant::now();
        let bus = loop {
            match Bus::connect(
                config.amqp_url.clone(),
                names.clone(),
                config.bus.clone(),
                metrics.clone(),
            )
            .await
            {
                Ok(bus) => break bus,
                Err(e) if started.elapsed() < config.bus.reconnect_timeout => {
                    tracing::warn!(error = %e, "RabbitMQ not reachable yet; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => return Err(e).context("RabbitMQ"),
            }
        };
        Self::assemble(config, metrics, db, bus)
    }

    /// A context whose bus handle never connects (publishes fail with `NotConnected`), for
    /// driving a stage's `prepare` and `commit` directly, with no broker at all.
    pub async fn without_broker(config: Config, metrics: Metrics) -> anyhow::Result<Self> {
        let db = service_pool(&config)?;
        db.check_schema().await.context("PostgreSQL")?;
        let bus = Bus::unconnected(
            config.amqp_url.clone(),
            Names::new(config.namespace.clone()),
            config.bus.clone(),
            metrics.clone(),
        );
        Self::assemble(config, metrics, db, bus)
    }

    /// The rest of a context around its database and bus handles.
    fn assemble(config: Config, metrics: Metrics, db: Db, bus: Bus) -> anyhow::Result<Self> {
        let cache = Cache::new(&config.redis_url, config.namespace.clone(), metrics.clone())?
            .with_id_secret(config.cache_key_secret.as_ref());
        let alerts = Alerts::new(&config.alerts, cache.clone(), metrics.clone());
        let outages = Outages::new(db.clone(), metrics.clone(), alerts.clone());
        Ok(Self {
            config: Arc::new(config),
            db,
            bus,
            cache,
            metrics,
            alerts,
            readiness: Readiness::default(),
            fatal: Fatal::new(),
            outages,
            stop: CancellationToken::new(),
            events: Arc::default(),
        })
    }

    /// The event hub of this process (docs/operator-mcp.md, events): one `LISTEN` on the
    /// event log for every waiting `events_wait` and `messages_send`, started on first use
    /// and stopped with this context's stop signal.
    pub fn event_hub(&self) -> &EventHub {
        self.events.get_or_init(|| {
            let (hub, _task) = EventHub::start(&self.db, self.stop.clone());
            hub
        })
    }

    /// The same context with another stop signal (the orchestrator stops services in order).
    pub fn with_stop(&self, stop: CancellationToken) -> Self {
        Self {
            stop,
            ..self.clone()
        }
    }
}
