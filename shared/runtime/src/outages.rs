//! Dependency outages (docs/architecture.md, poison and outages): when a stage finds
//! PostgreSQL unreachable, the message is not at fault, so it must not spend its delivery
//! budget. The stage holds it unacked and waits here until one prober per process sees the
//! dependency answer again; then the message is processed anew. New deliveries wait here
//! too, so consumption pauses by itself once the held messages fill the prefetch window.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use hermes_alerts::{AlertKind, Alerts};
use hermes_db::Db;
use hermes_telemetry::Metrics;

/// How long a dependency may stay down before ops are alerted.
const ALERT_AFTER: Duration = Duration::from_secs(60);
/// The prober's first pause; it doubles up to [`PROBE_MAX`].
const PROBE_FIRST: Duration = Duration::from_millis(250);
const PROBE_MAX: Duration = Duration::from_secs(2);
/// One probe's bound.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Something outside the message a stage needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dependency {
    Postgres,
}

impl Dependency {
    pub fn as_str(self) -> &'static str {
        match self {
            Dependency::Postgres => "postgres",
        }
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether each dependency is up, as this process sees it. Cheap to clone.
#[derive(Clone)]
pub struct Outages {
    inner: Arc<Inner>,
}

struct Inner {
    postgres: watch::Sender<bool>,
    probing: AtomicBool,
    db: Db,
    metrics: Metrics,
    alerts: Alerts,
}

impl Outages {
    /// Every dependency starts up; failures report them down.
    pub fn new(db: Db, metrics: Metrics, alerts: Alerts) -> Self {
        metrics
            .process
            .dependency_up
            .with_label_values(&[Dependency::Postgres.as_str()])
            .set(1);
        metrics
            .process
            .dependency_outages
            .with_label_values(&[Dependency::Postgres.as_str()]);
        let (postgres, _) = watch::channel(true);
        Self {
            inner: Arc::new(Inner {
                postgres,
                probing: AtomicBool::new(false),
                db,
                metrics,
                alerts,
            }),
        }
    }

    pub fn is_up(&self, dependency: Dependency) -> bool {
        match dependency {
            Dependency::Postgres => *self.inner.postgres.borrow(),
        }
    }

    /// A stage could not reach `dependency`: mark it down and start the one prober that
    /// brings it back up (if it is not running already).
    pub fn report_down(&self, dependency: Dependency) {
        let Dependency::Postgres = dependency;
        // Down at once, whoever probes: a held message must never find it up and spin.
        self.inner.postgres.send_replace(false);
        if self.inner.probing.swap(true, Ordering::SeqCst) {
            return;
        }
        let m = &self.inner.metrics;
        m.process
            .dependency_up
            .with_label_values(&[dependency.as_str()])
            .set(0);
        m.process
            .dependency_outages
            .with_label_values(&[dependency.as_str()])
            .inc();
        tracing::error!(%dependency, "dependency unreachable: holding messages until it is back");
        let this = self.clone();
        tokio::spawn(async move { this.probe(dependency).await });
    }

    async fn probe(self, dependency: Dependency) {
        let started = Instant::now();
        let mut pause = PROBE_FIRST;
        let mut alerted = false;
        loop {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(PROBE_MAX);
            let up = tokio::time::timeout(PROBE_TIMEOUT, self.inner.db.ping())
                .await
                .is_ok_and(|r| r.is_ok());
            if up {
                break;
            }
            if !alerted && started.elapsed() >= ALERT_AFTER {
                alerted = true;
                self.inner.alerts.raise(
                    AlertKind::DependencyDown,
                    dependency.as_str(),
                    format!(
                        "{dependency} has been unreachable for {} s; stages hold their messages (nothing is parked) until it is back",
                        started.elapsed().as_secs()
                    ),
                );
            }
        }
        tracing::warn!(%dependency, down_ms = started.elapsed().as_millis() as u64, "dependency is back; processing held messages");
        self.inner
            .metrics
            .process
            .dependency_up
            .with_label_values(&[dependency.as_str()])
            .set(1);
        // Probing off before up: a failure reported in between starts a new prober.
        self.inner.probing.store(false, Ordering::SeqCst);
        self.inner.postgres.send_replace(true);
    }

    /// Wait until `dependency` is up; `false` if `stop` came first.
    pub async fn wait_up(&self, dependency: Dependency, stop: &CancellationToken) -> bool {
        let Dependency::Postgres = dependency;
        let mut rx = self.inner.postgres.subscribe();
        tokio::select! {
            r = rx.wait_for(|up| *up) => r.is_ok(),
            _ = stop.cancelled() => false,
        }
    }
}
