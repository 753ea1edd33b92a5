//! The ingest service: the fleet's front door. Serves the OpenAI-compatible HTTP API on
//! `HERMES_HTTP_ADDR`, publishes accepted messages to `{ns}.router` with confirms, and
//! holds each caller until its run's outcome arrives on the run event stream.

mod a2a;
mod agent_mcp;
mod auth;
mod chat;
mod console;
mod content;
mod cors;
pub mod forge;
mod front_door;
mod health;
mod idempotency;
mod images;
mod jobs;
mod limits;
mod mcp_http;
mod model_choice;
pub mod openai;
pub mod openapi;
mod operator_mcp;
pub mod proxy_replies;
mod request_id;
mod responses;
mod rest;
pub mod routes;
mod runs;
mod statuses;
mod stream;
mod wait;
mod webhooks;
mod workspaces;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::HeaderValue;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use front_door::signed::SignedRoute;
use futures_util::StreamExt;
use hermes_cache::run_events::{RunEvents, Waiters};
use hermes_db::idempotency::Idempotency;
use hermes_runtime::Ctx;
use hermes_runtime::accept::Intake;
use hermes_runtime::http::{ApiError, ApiErrorCode, bound_body, track};
use routes::{Surface, Verb};
use serde_json::json;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

/// What the HTTP handlers share. One `Arc`: axum clones the state for every extractor and
/// middleware of every request, and a deep clone (the context's database and Redis
/// settings, four Redis handles) cost allocations on each.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

/// The contents of [`AppState`].
pub struct Shared {
    pub ctx: Ctx,
    pub events: RunEvents,
    pub waiters: Waiters,
    /// Dedupe, rate limits and the confirmed publish of each message accepted.
    pub intake: Intake,
    pub idempotency: Idempotency,
    keys: front_door::keys::Keys,
    /// The requests each key holds open (`HERMES_STREAMS_PER_KEY`).
    key_slots: Arc<limits::KeySlots>,
    /// When this replica started (its uptime on `/health/detailed`).
    started: Instant,
    /// Verifies JWT bearers on `/api/mcp` (None: API keys only).
    pub jwt: Option<agent_mcp::jwt::JwtVerifier>,
}

impl AppState {
    /// The state of a replica; a JWT key that cannot be read stops it at start.
    pub fn new(ctx: Ctx) -> anyhow::Result<Self> {
        images::set_max_bytes(ctx.config.ingest.api.image_max_bytes);
        let jwt = agent_mcp::jwt::JwtVerifier::new(&ctx.config.dispatcher.jwt)?;
        Ok(Self(Arc::new(Shared {
            jwt,
            events: RunEvents::new(ctx.cache.clone(), &ctx.config),
            waiters: Waiters::default(),
            intake: Intake::new(ctx.clone()),
            idempotency: Idempotency::new(ctx.db.clone()),
            keys: front_door::keys::Keys::new(ctx.config.ingest.front_door.key_misses_per_minute),
            key_slots: limits::KeySlots::new(
                ctx.config.ingest.streams_per_key,
                ctx.metrics.limits.clone(),
            ),
            started: Instant::now(),
            ctx,
        })))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The request body, or the JSON error for one that is too large or unreadable.
pub(crate) fn body_or_error(
    limit: usize,
    body: Result<Bytes, BytesRejection>,
) -> Result<Bytes, ApiError> {
    body.map_err(|r| match r.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ApiErrorCode::BodyTooLarge,
            format!("request body is larger than {limit} bytes"),
        ),
        status => ApiError::new(status, ApiErrorCode::InvalidBody, r.body_text()),
    })
}

/// The body of an API request: read within `limit` (as [`body_or_error`]) and free of the NUL
/// character, which PostgreSQL cannot store in text: a run, response or job holding one would
/// be refused there after its caller was told it was accepted.
pub(crate) fn api_body(
    limit: usize,
    body: Result<Bytes, BytesRejection>,
) -> Result<Bytes, ApiError> {
    let body = body_or_error(limit, body)?;
    if has_nul_escape(&body) {
        return Err(ApiError::bad_request(
            ApiErrorCode::InvalidRequest,
            "text may not contain the NUL character (\\u0000)",
        ));
    }
    Ok(body)
}

/// Whether JSON text holds the escape `\u0000` (a raw NUL is not valid JSON): one whose
/// backslash is not itself escaped, i.e. preceded by an even number of backslashes.
fn has_nul_escape(json: &[u8]) -> bool {
    const ESCAPE: &[u8] = b"\\u0000";
    json.windows(ESCAPE.len()).enumerate().any(|(i, w)| {
        w == ESCAPE && json[..i].iter().rev().take_while(|b| **b == b'\\').count() % 2 == 0
    })
}

async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

async fn models(State(app): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({
        "object": "list",
        "data": [{ "id": app.ctx.config.ingest.api.model_name, "object": "model", "owned_by": "hermes" }]
    }))
}

async fn not_found() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ApiErrorCode::NotFound,
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

/// Shed load instead of queueing it: beyond `HERMES_MAX_IN_FLIGHT` requests at once (a broker
/// whose confirms stall, a flood), answer 503 with `Retry-After` so the caller retries later,
/// rather than holding ever more requests in memory. Health checks are never shed.
pub(crate) async fn bound_in_flight(
    State((app, slots)): State<(AppState, Arc<Semaphore>)>,
    req: Request,
    next: Next,
) -> Response {
    match slots.try_acquire_owned() {
        Ok(permit) => {
            let resp = next.run(req).await;
            if is_event_stream(&resp) {
                hold_while_streaming(resp, permit)
            } else {
                resp
            }
        }
        Err(_) => front_door::shed(&app, front_door::Pool::InFlight),
    }
}

pub(crate) fn is_event_stream(resp: &Response) -> bool {
    resp.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// A streamed answer waits on its run after the handler returned: it keeps its slot until
/// the body ends or the caller hangs up, as a waiting non-streamed request does.
fn hold_while_streaming(resp: Response, permit: OwnedSemaphorePermit) -> Response {
    let (parts, body) = resp.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _slot = &permit;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        ApiErrorCode::Internal,
        "internal error",
    )
    .into_response()
}

/// The HTTP application (exposed for tests that drive it without a socket).
pub fn app(state: AppState) -> Router {
    let metrics = state.ctx.metrics.clone();
    // A request takes one of HERMES_MAX_IN_FLIGHT slots only once its caller is known
    // (docs/security.md, "The front door under slow or hostile clients"): a header secret
    // checked, a Bearer key resolved (that look-up may reach PostgreSQL, and a stranger's
    // never holds a slot), or a body's signature verified after it was read in the small
    // pool of unverified bodies. Then the body is read, within the slot.
    let slots = Arc::new(Semaphore::new(state.ctx.config.ingest.max_in_flight));
    let slot = middleware::from_fn_with_state((state.clone(), slots.clone()), bound_in_flight);
    let unverified = front_door::signed::Unverified::new(state.clone());
    let signed = |route| {
        middleware::from_fn_with_state((unverified.clone(), route), front_door::signed::read_signed)
    };
    let screen = middleware::from_fn_with_state(state.clone(), front_door::screen_bearer);
    // The API's routes, through one list per caller check: the capability flags are read
    // from them. Every group goes through the idempotency middleware (POSTs with an
    // Idempotency-Key) after its caller was authorized, and within a slot. A route mounted on
    // one of these groups before `all` is read gets all of that.
    let api = Surface::default()
        .route(Verb::Post, "/v1/chat/completions", chat::completions)
        .route(Verb::Get, "/v1/models", models)
        .route(Verb::Post, "/v1/responses", responses::create)
        .route(Verb::Get, "/v1/responses/{id}", responses::get)
        .route(Verb::Delete, "/v1/responses/{id}", responses::delete)
        .route(Verb::Post, "/v1/runs", runs::create)
        .route(Verb::Get, "/v1/runs", runs::list)
        .route(Verb::Get, "/health/detailed", health::detailed);
    let rest = Surface::default().route(Verb::Post, "/v1/messages", rest::post_message);
    // A run's own routes: runs of the REST channel and of the API alike.
    let run_routes = Surface::default()
        .route(Verb::Get, "/v1/runs/{id}", runs::get)
        .route(Verb::Get, "/v1/runs/{id}/events", runs::events)
        .route(Verb::Post, "/v1/runs/{id}/stop", runs::stop);
    let jobs = Surface::default()
        .route(Verb::Get, "/api/jobs", jobs::list)
        .route(Verb::Post, "/api/jobs", jobs::create)
        .route(Verb::Get, "/api/jobs/{id}", jobs::get)
        .route(Verb::Patch, "/api/jobs/{id}", jobs::patch)
        .route(Verb::Delete, "/api/jobs/{id}", jobs::delete)
        .route(Verb::Post, "/api/jobs/{id}/pause", jobs::pause)
        .route(Verb::Post, "/api/jobs/{id}/resume", jobs::resume)
        .route(Verb::Post, "/api/jobs/{id}/run", jobs::run_now);
    let workspaces = Surface::default()
        .route(Verb::Post, "/workspaces", workspaces::create)
        .route(Verb::Get, "/workspaces/{id}", workspaces::get)
        .route(
            Verb::Put,
            "/workspaces/{id}/secrets",
            workspaces::put_workspace,
        )
        .route(Verb::Put, "/settings/secrets", workspaces::put_global);
    // A2A per workspace (docs/a2a.md): its JSON-RPC route and its agent card.
    let a2a = Surface::default()
        .route(Verb::Post, "/workspaces/{id}/a2a", a2a::rpc)
        .route(
            Verb::Get,
            "/workspaces/{id}/a2a/.well-known/agent-card.json",
            a2a::agent_card,
        );
    // The agent MCP surface checks its own callers (JSON-RPC refusals have their own shape),
    // from the key resolved before the slot.
    let mcp = agent_mcp::surface()
        .into_router()
        .route_layer(slot.clone())
        .route_layer(screen.clone());
    // So does the operator MCP server (its keys need the operator scope).
    let operator_mcp = operator_mcp::surface()
        .into_router()
        .route_layer(slot.clone())
        .route_layer(screen);
    let all: Vec<_> = [
        api.mounted(),
        rest.mounted(),
        run_routes.mounted(),
        jobs.mounted(),
        workspaces.mounted(),
        a2a.mounted(),
    ]
    .concat();
    let cors = cors::Origins::new(&state.ctx.config.ingest.api.cors_origins);
    let api = routes::with_capabilities(api, &all, cors.is_some());
    let idempotent = middleware::from_fn_with_state(state.clone(), idempotency::idempotent);
    // A key's requests that may be held (waits, streams) take one of its slots once the key
    // is known (docs/security.md, "No caller can hurt another"), before a main slot.
    let key_slot = middleware::from_fn_with_state(state.clone(), limits::hold_key_slot);
    // Each group behind its caller check, outside the slot: a stranger never holds one.
    let api = api
        .into_router()
        .route_layer(idempotent.clone())
        .route_layer(slot.clone())
        .route_layer(key_slot.clone())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            rest::require_chat_caller,
        ));
    let rest = rest
        .into_router()
        .route_layer(idempotent.clone())
        .route_layer(slot.clone())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            rest::require_caller,
        ));
    let run_routes = run_routes
        .into_router()
        .route_layer(idempotent.clone())
        .route_layer(slot.clone())
        .route_layer(key_slot.clone())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            rest::require_run_caller,
        ));
    let jobs = jobs
        .into_router()
        .route_layer(idempotent.clone())
        .route_layer(slot.clone())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            rest::require_jobs_caller,
        ));
    let a2a = a2a
        .into_router()
        .route_layer(idempotent.clone())
        .route_layer(slot.clone())
        .route_layer(key_slot)
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            rest::require_a2a_caller,
        ));
    let workspaces = workspaces
        .into_router()
        .route_layer(idempotent)
        .route_layer(slot.clone())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            rest::require_operator_caller,
        ));
    // A Forge's wakes, at the configured path, mounted only when a secret is set: their
    // signature is the caller check, made on the raw body read in the pool of unverified
    // bodies, before the wake takes a slot.
    let forge_settings = &state.ctx.config.forge;
    let forge = if forge_settings.enabled() {
        Surface::default()
            .route(Verb::Post, forge_settings.path.clone(), forge::wake)
            .into_router()
            .route_layer(slot.clone())
            .route_layer(signed(SignedRoute::Forge))
            .layer(DefaultBodyLimit::max(forge_settings.max_body_bytes))
    } else {
        Router::new()
    };
    // Proxy mode's answers, signed by the upstream with the proxy key's secret, verified as
    // a Forge wake is: on the raw body, before the answer takes a slot.
    let proxy_replies = if state.ctx.config.proxy.is_some() {
        Surface::default()
            .route(Verb::Post, "/proxy/replies", proxy_replies::reply)
            .into_router()
            .route_layer(slot.clone())
            .route_layer(signed(SignedRoute::ProxyReplies))
    } else {
        Router::new()
    };
    let webhooks = webhooks::routes(&state, slots, &unverified);
    // With API_SERVER_ENABLED=false the API's routes are not mounted at all: they answer
    // 404 like any unknown path (docs/api.md, turning the API off).
    let api_enabled = state.ctx.config.ingest.api_enabled;
    // The operator console, only when asked for (docs/console.md).
    let console = if state.ctx.config.ingest.console {
        console::routes(&state)
    } else {
        Router::new()
    };
    let served = mcp
        .merge(console)
        .merge(operator_mcp)
        .merge(forge)
        .merge(proxy_replies)
        .merge(webhooks);
    let bounded = if api_enabled {
        served
            .merge(api)
            .merge(rest)
            .merge(run_routes)
            .merge(jobs)
            .merge(workspaces)
            .merge(a2a)
            .route("/openapi.json", get(openapi::document))
    } else {
        served
    };
    let keyless = state.ctx.config.ingest.api_server_key.is_none();
    let limit_metrics = state.ctx.metrics.limits.clone();
    let app = Router::new()
        .route("/health", get(health))
        .route("/v1/health", get(health))
        .merge(bounded)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(
            state.ctx.config.ingest.max_body_bytes,
        ))
        .layer(middleware::from_fn_with_state(
            (state.ctx.config.ingest.http_body_timeout, metrics.clone()),
            bound_body,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            front_door::tag_client,
        ))
        .with_state(state)
        .layer(middleware::from_fn_with_state(metrics, track))
        .layer(middleware::from_fn(security_headers))
        .layer(CatchPanicLayer::custom(panic_response));
    // Without a key only loopback is served, and only to requests naming it (DNS rebinding).
    let app = if keyless {
        app.layer(middleware::from_fn_with_state(
            limit_metrics,
            limits::loopback_host,
        ))
    } else {
        app
    };
    // Outermost: preflights are answered before anything else runs, and every answer to an
    // allowed origin (errors and panics included) carries the CORS headers.
    match cors {
        Some(origins) => app.layer(middleware::from_fn_with_state(origins, cors::cors)),
        None => app,
    }
}

/// Bind `HERMES_HTTP_ADDR` and serve until `ctx.stop`.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    ctx.config.ingest.check()?;
    let listener = TcpListener::bind(ctx.config.ingest.http_addr)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on HERMES_HTTP_ADDR={} (with API_SERVER_HOST/API_SERVER_PORT applied): {e}",
                ctx.config.ingest.http_addr
            )
        })?;
    serve(ctx, listener).await
}

/// Serve on an already bound listener until `ctx.stop`; in-flight requests finish first.
pub async fn serve(ctx: Ctx, listener: TcpListener) -> anyhow::Result<()> {
    // The address actually bound, which tests and `hermes all` may have chosen themselves.
    let bound = listener.local_addr()?;
    ctx.config.ingest.check_at(bound)?;
    if ctx.config.ingest.api_server_key.is_none() {
        tracing::warn!(
            "API_SERVER_KEY is not set: the API is open to anything on this machine that reaches {bound} (loopback only; requests must name a loopback host)"
        );
    }
    let state = AppState::new(ctx.clone())?;
    let subscriber_stop = tokio_util::sync::CancellationToken::new();
    let subscriber = state
        .waiters
        .spawn_subscriber(ctx.cache.clone(), subscriber_stop.clone());
    webhooks::log_channels(&state);
    let addr = bound;
    if !ctx.config.ingest.api_enabled {
        tracing::info!(
            "API_SERVER_ENABLED=false: the API's routes are off; only the webhooks and the MCP servers are served"
        );
    }
    tracing::info!(%addr, "ingest listening");
    let limits = hermes_runtime::http::ConnLimits {
        header_timeout: ctx.config.ingest.http_header_timeout,
        write_timeout: ctx.config.ingest.http_write_timeout,
        write_cuts: Some(ctx.metrics.http.slow_clients.with_label_values(&["write"])),
    };
    hermes_runtime::http::serve(listener, app(state), limits, ctx.stop.clone()).await?;
    subscriber_stop.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(1), subscriber).await;
    tracing::info!("ingest stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::has_nul_escape;

    #[test]
    fn a_nul_escape_is_found_and_an_escaped_backslash_before_u0000_is_not_one() {
        assert!(has_nul_escape(br#"{"input":"a\u0000b"}"#));
        assert!(has_nul_escape(br#"{"input":"\\\u0000"}"#));
        assert!(!has_nul_escape(br#"{"input":"\\u0000"}"#));
        assert!(!has_nul_escape(br#"{"input":"\u0001"}"#));
    }
}
