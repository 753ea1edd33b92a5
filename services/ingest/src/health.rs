//! `GET /health/detailed` (docs/api.md, health): for monitoring, behind the operator's key.
//! Each dependency is asked once, with its latency, and the namespace's queue depths and
//! the open runs are read where every replica reads them (RabbitMQ, PostgreSQL), so any
//! replica answers for the fleet.

use std::future::Future;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use futures_util::future::join_all;
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::stage::Stage;
use serde_json::{Map, Value, json};

use crate::AppState;
use crate::rest::Caller;

/// How long one dependency may take to answer before it counts as unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A probe's result: reachable (with what it read) or not (with why), and its latency.
async fn probe<T, E: std::fmt::Display>(
    f: impl Future<Output = Result<T, E>>,
) -> (Result<T, String>, f64) {
    let started = Instant::now();
    let r = match tokio::time::timeout(PROBE_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
    };
    let ms = (started.elapsed().as_secs_f64() * 1000.0 * 100.0).round() / 100.0;
    (r, ms)
}

fn dependency<T>(r: &Result<T, String>, latency_ms: f64) -> Value {
    match r {
        Ok(_) => json!({"ok": true, "latency_ms": latency_ms}),
        Err(e) => json!({"ok": false, "latency_ms": latency_ms, "error": e}),
    }
}

/// This replica's own use of its machine and its connections per pool: unlike the rest of
/// the answer, these are the answering replica's, not the fleet's.
fn resources(app: &AppState, redis_up: bool) -> Value {
    let pool = app.ctx.db.pool_status();
    let process = match hermes_telemetry::resources::usage() {
        Some(u) => json!({
            "rss_bytes": u.rss_bytes,
            "cpu_seconds": u.cpu_seconds,
            "open_fds": u.open_fds,
            "threads": u.threads,
        }),
        None => Value::Null,
    };
    json!({
        "replica": process,
        "connections": {
            "postgres": {
                "open": pool.open,
                "idle": pool.idle,
                "max": pool.max,
                "waiting": pool.waiting,
            },
            // One multiplexed connection; two to the broker (publishing and consuming).
            "redis": {"open": u8::from(redis_up)},
            "rabbitmq": {"open": if app.ctx.bus.is_connected() { 2 } else { 0 }},
        },
    })
}

/// The handler; only the operator (`API_SERVER_KEY`) may read the fleet's state.
/// One stage's work queue and parking queue, as `/health/detailed` and the console's
/// overview show them.
pub(crate) struct StageQueues {
    pub stage: Stage,
    /// Messages ready in the work queue.
    pub messages: u32,
    /// Consumers attached to the work queue.
    pub consumers: u32,
    /// Messages in the parking queue.
    pub parked: u32,
}

/// Every stage's [`StageQueues`], by passive declarations asked all at once.
pub(crate) async fn stage_queues(
    bus: &hermes_bus::Bus,
) -> Result<Vec<StageQueues>, hermes_bus::BusError> {
    let names = bus.names();
    let asks = Stage::ALL.iter().flat_map(|s| {
        [names.queue(*s), names.parking(*s)].map(|q| async move { bus.queue_stats(&q).await })
    });
    let stats = join_all(asks)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Stage::ALL
        .iter()
        .zip(stats.chunks(2))
        .map(|(stage, pair)| StageQueues {
            stage: *stage,
            messages: pair[0].0,
            consumers: pair[0].1,
            parked: pair[1].0,
        })
        .collect())
}

pub async fn detailed(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
) -> Response {
    if !matches!(caller, Caller::Operator) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            ApiErrorCode::Forbidden,
            "only API_SERVER_KEY may read the detailed health",
        )
        .into_response();
    }
    let idle = app.ctx.config.router.session_idle();
    let postgres = probe(async {
        let client = app.ctx.db.get().await?;
        let runs = hermes_db::runs::count_open(&client).await?;
        let sessions = hermes_db::sessions::count_open(&client, chrono::Utc::now(), idle).await?;
        Ok::<_, hermes_db::DbError>((runs, sessions))
    });
    let redis = probe(app.ctx.cache.ping());
    let queues = probe(stage_queues(&app.ctx.bus));
    let ((pg, pg_ms), (rd, rd_ms), (mq, mq_ms)) = tokio::join!(postgres, redis, queues);
    let mut depths = Map::new();
    if let Ok(stats) = &mq {
        for q in stats {
            depths.insert(
                q.stage.as_str().into(),
                json!({
                    "messages": q.messages,
                    "consumers": q.consumers,
                    "parked": q.parked,
                }),
            );
        }
    }
    let ok = pg.is_ok() && rd.is_ok() && mq.is_ok();
    let body = json!({
        "status": if ok { "ok" } else { "degraded" },
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_secs": app.started.elapsed().as_secs(),
        "namespace": app.ctx.config.namespace.as_str(),
        "dependencies": {
            "postgres": dependency(&pg, pg_ms),
            "redis": dependency(&rd, rd_ms),
            "rabbitmq": dependency(&mq, mq_ms),
        },
        "queues": if mq.is_ok() { Value::Object(depths) } else { Value::Null },
        "runs_in_flight": pg.as_ref().ok().map(|(runs, _)| runs.runs),
        "running_agents": pg.as_ref().ok().map(|(runs, _)| runs.agents),
        "active_sessions": pg.as_ref().ok().map(|(_, sessions)| sessions),
        "session_idle_secs": idle.as_secs(),
        "resources": resources(&app, rd.is_ok()),
    });
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}
