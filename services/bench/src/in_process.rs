//! Services of the fleet run inside a bench's own process (`bench events`, `bench console`):
//! on a scratch database and a namespace of the run's own, on loopback ports of their own,
//! until the bench stops them.

use std::collections::HashMap;

use hermes::{Listeners, Service};
use hermes_config::Config;
use hermes_db::scratch::ScratchDb;
use secrecy::ExposeSecret;
use tokio::net::TcpListener;

/// A bench's own database and namespace, made at its start and removed at its end.
pub(crate) struct Scratch {
    pub(crate) db: ScratchDb,
    pub(crate) ns: String,
}

impl Scratch {
    /// A scratch database named after `prefix` and a namespace `<prefix><id>`, said on stderr
    /// under the bench's `name`.
    pub(crate) async fn create(name: &str, prefix: &str, config: &Config) -> anyhow::Result<Self> {
        let id = &uuid::Uuid::now_v7().simple().to_string()[20..];
        let ns = format!("{prefix}{id}");
        let db = ScratchDb::create(&config.database_url, &format!("hermes_{prefix}")).await?;
        eprintln!("{name}: database {}, namespace {ns}", db.name());
        Ok(Self { db, ns })
    }

    /// Delete the namespace's queues and exchanges (declared with `settings`, the fleet's
    /// bus settings exactly: the broker refuses a queue declared otherwise), then the
    /// database, whatever the broker says.
    pub(crate) async fn remove(
        self,
        name: &str,
        config: &Config,
        settings: hermes_config::BusSettings,
    ) -> anyhow::Result<()> {
        let deleted = crate::delete_namespace(name, config, &self.ns, settings).await;
        self.db.drop_now().await?;
        deleted
    }
}

/// The machine's servers (from `config`), `scratch`'s database and namespace `ns`, JSON logs,
/// queues that expire should their deletion at the end fail; then `extra` on top.
pub(crate) fn scratch_config(
    config: &Config,
    ns: &str,
    scratch: &ScratchDb,
    extra: &[(&str, &str)],
) -> anyhow::Result<Config> {
    let mut vars: HashMap<&str, String> = [
        ("DATABASE_URL", scratch.url.expose_secret().to_string()),
        ("REDIS_URL", config.redis_url.expose_secret().to_string()),
        ("AMQP_URL", config.amqp_url.expose_secret().to_string()),
        ("HERMES_NAMESPACE", ns.to_string()),
        // The listeners are this process's own (loopback, free ports).
        ("HERMES_HTTP_ADDR", "127.0.0.1:0".to_string()),
        ("HERMES_ADMIN_ADDR", "127.0.0.1:0".to_string()),
        ("HERMES_LOG_FORMAT", "json".to_string()),
        ("HERMES_QUEUE_EXPIRES_SECS", "900".to_string()),
    ]
    .into_iter()
    .collect();
    for (k, v) in extra {
        vars.insert(k, v.to_string());
    }
    Config::from_lookup(&move |k| vars.get(k).cloned(), None)
        .map_err(|e| anyhow::anyhow!("bench configuration: {e}"))
}

/// The services running in this process.
pub(crate) struct InProcess {
    /// `http://127.0.0.1:<port>` of their HTTP listener.
    pub(crate) base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    fleet: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl InProcess {
    /// Start `services` with `config` and wait until they are ready.
    pub(crate) async fn start(
        config: Config,
        services: &'static [Service],
    ) -> anyhow::Result<Self> {
        let http = TcpListener::bind("127.0.0.1:0").await?;
        let admin = TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", http.local_addr()?);
        let ready = format!("http://{}/readyz", admin.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let mut fleet = tokio::spawn(async move {
            hermes::run(
                config,
                services,
                Listeners {
                    http: Some(http),
                    admin: Some(admin),
                },
                async {
                    let _ = stopped.await;
                },
            )
            .await
        });
        crate::wait_ready(&reqwest::Client::new(), &ready, &mut fleet).await?;
        Ok(Self { base, stop, fleet })
    }

    /// Stop them and wait until they have.
    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.fleet.await?
    }
}
