//! The admin server every service runs on `HERMES_ADMIN_ADDR`: `/metrics` for Prometheus,
//! `/healthz` (the process is alive) and `/readyz` (connected to what it needs, done with
//! the start-up steps its services announced, and not shutting down; Kubernetes stops
//! routing to it otherwise).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use hermes_bus::Bus;
use hermes_db::Db;
use hermes_telemetry::Metrics;

/// Readiness flags shared by the components of one process.
#[derive(Clone, Default)]
pub struct Readiness {
    stopping: Arc<AtomicBool>,
    db_ok: Arc<AtomicBool>,
    /// Start-up steps announced and not done yet (the tools stage's first publication of
    /// the tool registry): the process is not ready while any is pending.
    pending: Arc<Mutex<BTreeSet<&'static str>>>,
}

impl Readiness {
    /// Hold readiness until [`Readiness::done`] is called with `step`. Announced by the
    /// composition root before the service that does the step starts, so `/readyz` can
    /// never answer in between.
    pub fn expect(&self, step: &'static str) {
        hermes_types::sync::lock(&self.pending).insert(step);
    }

    /// `step` is done (a step never announced is ignored).
    pub fn done(&self, step: &'static str) {
        hermes_types::sync::lock(&self.pending).remove(step);
    }

    /// The announced steps not done yet.
    pub fn pending(&self) -> Vec<&'static str> {
        hermes_types::sync::lock(&self.pending)
            .iter()
            .copied()
            .collect()
    }

    /// Turn readiness off for good: the process is shutting down.
    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Probe the database every few seconds so `/readyz` answers without a query.
    pub fn spawn_db_probe(&self, db: Db, stop: CancellationToken) {
        let flag = self.db_ok.clone();
        tokio::spawn(async move {
            loop {
                let ok = tokio::time::timeout(Duration::from_secs(2), db.ping())
                    .await
                    .is_ok_and(|r| r.is_ok());
                flag.store(ok, Ordering::SeqCst);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                }
            }
        });
    }
}

#[derive(Clone)]
struct AdminState {
    metrics: Metrics,
    bus: Bus,
    readiness: Readiness,
}

async fn metrics(State(s): State<AdminState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(),
    )
        .into_response()
}

async fn healthz() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

async fn readyz(State(s): State<AdminState>) -> Response {
    let stopping = s.readiness.is_stopping();
    let bus = s.bus.is_connected();
    let db = s.readiness.db_ok.load(Ordering::SeqCst);
    let starting = s.readiness.pending();
    let ready = !stopping && bus && db && starting.is_empty();
    s.metrics
        .process
        .ready
        .with_label_values(&["process"])
        .set(if ready { 1.0 } else { 0.0 });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({
            "ready": ready,
            "checks": { "shutting_down": stopping, "rabbitmq": bus, "postgres": db, "starting": starting }
        })),
    )
        .into_response()
}

/// Serve the admin endpoints on `listener` until `stop`.
pub async fn serve(
    listener: TcpListener,
    metrics_: Metrics,
    bus: Bus,
    readiness: Readiness,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AdminState {
            metrics: metrics_,
            bus,
            readiness,
        });
    // Scrapers and probes send their headers at once; an idle connection is cut.
    let limits = crate::http::ConnLimits {
        header_timeout: ADMIN_HEADER_TIMEOUT,
        write_timeout: ADMIN_HEADER_TIMEOUT,
        write_cuts: None,
    };
    crate::http::serve(listener, app, limits, stop).await
}

/// How long a client of the admin port may take to send its headers.
const ADMIN_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
