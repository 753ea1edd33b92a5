//! The ingest service: the fleet's front door. Serves the OpenAI-compatible HTTP API on
//! `HERMES_HTTP_ADDR`, publishes accepted messages to `{ns}.router` with confirms, and
//! holds each caller until its run's outcome arrives on the run event stream.

mod auth;
mod chat;
pub mod openai;
mod wait;

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hermes_shared::Ctx;
use hermes_shared::cache::run_events::{RunEvents, Waiters};
use hermes_shared::http::{ApiError, track};
use serde_json::json;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

use auth::ApiKey;

/// What the HTTP handlers share.
#[derive(Clone)]
pub struct AppState {
    pub ctx: Ctx,
    pub events: RunEvents,
    pub waiters: Waiters,
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

async fn models(State(app): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({
        "object": "list",
        "data": [{ "id": app.ctx.config.file.api.model_name, "object": "model", "owned_by": "hermes" }]
    }))
}

async fn not_found() -> Response {
    ApiError::new(
        axum::http::StatusCode::NOT_FOUND,
        "not_found",
        "no such route",
    )
    .into_response()
}

async fn security_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    resp
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "internal error",
    )
    .into_response()
}

/// The HTTP application (exposed for tests that drive it without a socket).
pub fn app(state: AppState) -> Router {
    let key = ApiKey(state.ctx.config.api_server_key.clone());
    let metrics = state.ctx.metrics.clone();
    let api = Router::new()
        .route("/v1/chat/completions", post(chat::completions))
        .route("/v1/models", get(models))
        .route_layer(middleware::from_fn_with_state(key, auth::require_key));
    Router::new()
        .route("/health", get(health))
        .route("/v1/health", get(health))
        .merge(api)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(state.ctx.config.max_body_bytes))
        .with_state(state)
        .layer(middleware::from_fn_with_state(metrics, track))
        .layer(middleware::from_fn(security_headers))
        .layer(CatchPanicLayer::custom(panic_response))
}

/// Bind `HERMES_HTTP_ADDR` and serve until `ctx.stop`.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    ctx.config.check_ingest()?;
    let listener = TcpListener::bind(ctx.config.http_addr).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on HERMES_HTTP_ADDR={}: {e}",
            ctx.config.http_addr
        )
    })?;
    serve(ctx, listener).await
}

/// Serve on an already bound listener until `ctx.stop`; in-flight requests finish first.
pub async fn serve(ctx: Ctx, listener: TcpListener) -> anyhow::Result<()> {
    ctx.config.check_ingest()?;
    if ctx.config.api_server_key.is_none() {
        tracing::warn!(
            "API_SERVER_KEY is not set: the API is open to anyone who can reach {}",
            ctx.config.http_addr
        );
    }
    let waiters = Waiters::default();
    let subscriber_stop = tokio_util::sync::CancellationToken::new();
    let subscriber = waiters.spawn_subscriber(ctx.cache.clone(), subscriber_stop.clone());
    let state = AppState {
        events: RunEvents::new(ctx.cache.clone()),
        waiters,
        ctx: ctx.clone(),
    };
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "ingest listening");
    let stop = ctx.stop.clone();
    axum::serve(listener, app(state))
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await?;
    subscriber_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(1), subscriber).await;
    tracing::info!("ingest stopped");
    Ok(())
}
