//! The routes whose signature covers the body (the chat platforms' signed webhooks, such as
//! WhatsApp Cloud API and Instagram's `X-Hub-Signature-256`; the Forge's `X-Forge-Signature`): their caller is unknown until the
//! whole body has arrived, so the body is read in a small pool of its own
//! (`HERMES_UNVERIFIED_BODIES`), within a short deadline
//! (`HERMES_UNVERIFIED_BODY_TIMEOUT_SECS`), and the request takes one of
//! `HERMES_MAX_IN_FLIGHT` only once its signature holds (docs/security.md, "The front door
//! under slow or hostile clients"). In order, each refusal answered at once:
//!
//! 1. the route's secret and its signature header ([`SignedRoute::precheck`]: 404, 401);
//! 2. a `Content-Length` beyond the route's limit (413, nothing read);
//! 3. a place in the pool, waited for at most `HERMES_UNVERIFIED_BODY_QUEUE_SECS` (a waiting
//!    request holds only its connection: a flood of slow bodies waits instead of reconnecting
//!    in a loop, which costs the CPU every caller needs), else 503 with `Retry-After`
//!    (`hermes_http_shed_total{pool="unverified_body"}`);
//! 4. the body within the deadline (408, `hermes_http_slow_clients_total{phase="unverified_body"}`)
//!    and the limit (413);
//! 5. the signature over the raw bytes (401), after which the place in the pool is given back
//!    and the request goes on, body in hand, to its slot and its handler.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::header::{CONNECTION, CONTENT_LENGTH};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use hermes_net::signing::{FORGE_BODY_SIGNATURE, FORGE_SIGNATURE, FORGE_TIMESTAMP};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::model::Platform;
use tokio::sync::Semaphore;

use super::{Pool, shed};
use crate::AppState;
use crate::forge::{self, verify};
use crate::proxy_replies;
use crate::webhooks::{self, Hook};

/// A route whose signature covers its body.
#[derive(Clone)]
pub enum SignedRoute {
    /// A chat platform's webhook whose signature covers the body ([`Auth::Signature`]:
    /// WhatsApp's Cloud API and Instagram, `X-Hub-Signature-256`).
    ///
    /// [`Auth::Signature`]: hermes_channels::inbound::Auth::Signature
    Channel(Hook),
    /// `POST /agents/forge` (`HERMES_FORGE_WEBHOOK_SECRETS`).
    Forge,
    /// `POST /proxy/replies` in proxy mode (`GATEWAY_PROXY_SECRET`, Standard Webhooks).
    ProxyReplies,
}

impl SignedRoute {
    /// The largest body the route takes.
    fn limit(&self, app: &AppState) -> usize {
        match self {
            SignedRoute::Channel(hook) => hook.max_body_bytes(),
            SignedRoute::Forge => app.ctx.config.forge.max_body_bytes,
            SignedRoute::ProxyReplies => app.ctx.config.ingest.max_body_bytes,
        }
    }

    /// A refusal, counted where the route counts its refusals (`reason` for the channels).
    fn refuse(&self, app: &AppState, reason: &'static str, e: ApiError) -> Response {
        match self {
            SignedRoute::Channel(hook) => webhooks::refused(app, hook.platform(), reason, e),
            SignedRoute::Forge => forge::refused(app, e),
            SignedRoute::ProxyReplies => proxy_replies::refused(app, e),
        }
    }

    /// Refuse, before anything is read, a request to a route without its secret or without
    /// the signature header it verifies.
    pub fn precheck(&self, app: &AppState, headers: &HeaderMap) -> Option<Response> {
        let forge = &app.ctx.config.forge;
        let needed: &[&'static str] = match self {
            SignedRoute::Channel(hook) => {
                return hook
                    .check_headers(headers, None)
                    .err()
                    .map(|why| webhooks::refusal(app, hook.platform(), why));
            }
            // The Forge route is not even mounted without a secret.
            SignedRoute::Forge if !forge.enabled() => {
                return Some(webhooks::not_configured(app, Platform::Forge));
            }
            SignedRoute::Forge if forge.body_signature => &[FORGE_BODY_SIGNATURE],
            SignedRoute::Forge => &[FORGE_SIGNATURE, FORGE_TIMESTAMP],
            SignedRoute::ProxyReplies => &proxy_replies::HEADERS,
        };
        let missing = needed.iter().copied().find(|h| !headers.contains_key(*h))?;
        let e = verify::SignatureError::Missing(missing);
        Some(self.refuse(
            app,
            "missing_signature",
            ApiError::new(StatusCode::UNAUTHORIZED, e.code(), e.message()),
        ))
    }

    /// Whether `body` is signed as the route requires; `Err` is the refusal to answer.
    fn verify(
        &self,
        app: &AppState,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(), Box<Response>> {
        match self {
            SignedRoute::Channel(hook) => hook
                .check_body(headers, body)
                .map_err(|why| Box::new(webhooks::refusal(app, hook.platform(), why))),
            SignedRoute::Forge => forge::verify_signature(app, headers, body)
                .map(|_| ())
                .map_err(|e| Box::new(forge::refused(app, e))),
            SignedRoute::ProxyReplies => proxy_replies::verify_signature(app, headers, body)
                .map_err(|e| Box::new(proxy_replies::refused(app, e))),
        }
    }
}

/// The pool bodies are read in before their signature is checked: one for all the routes.
#[derive(Clone)]
pub struct Unverified {
    app: AppState,
    pool: Arc<Semaphore>,
}

impl Unverified {
    /// The pool of `HERMES_UNVERIFIED_BODIES` places.
    pub fn new(app: AppState) -> Self {
        let places = app.ctx.config.ingest.front_door.unverified_bodies;
        Self {
            app,
            pool: Arc::new(Semaphore::new(places)),
        }
    }
}

/// Why a body was not read.
enum Unread {
    TooLarge,
    TimedOut,
    Broken(String),
}

/// Read `body` whole within `limit` bytes and `deadline`.
async fn read(body: Body, limit: usize, deadline: Duration) -> Result<Bytes, Unread> {
    let collect = async {
        let mut stream = body.into_data_stream();
        let mut buf = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| Unread::Broken(e.to_string()))?;
            if buf.len() + chunk.len() > limit {
                return Err(Unread::TooLarge);
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(buf))
    };
    tokio::time::timeout(deadline, collect)
        .await
        .unwrap_or(Err(Unread::TimedOut))
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        ApiErrorCode::BodyTooLarge,
        format!("request body is larger than {limit} bytes"),
    )
}

/// Middleware of a [`SignedRoute`], outside its slot: the module's steps.
pub async fn read_signed(
    State((unverified, route)): State<(Unverified, SignedRoute)>,
    req: Request,
    next: Next,
) -> Response {
    let app = &unverified.app;
    if let Some(refusal) = route.precheck(app, req.headers()) {
        return refusal;
    }
    let limit = route.limit(app);
    let announced = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return route.refuse(app, "too_large", too_large(limit));
    }
    let queue = app.ctx.config.ingest.front_door.unverified_body_queue;
    let place = match unverified.pool.clone().try_acquire_owned() {
        Ok(place) => place,
        Err(_) if queue.is_zero() => return shed(app, Pool::UnverifiedBody),
        Err(_) => {
            let waiting = &app.ctx.metrics.front_door.unverified_waiting;
            waiting.inc();
            let got = tokio::time::timeout(queue, unverified.pool.clone().acquire_owned()).await;
            waiting.dec();
            match got {
                Ok(Ok(place)) => place,
                _ => return shed(app, Pool::UnverifiedBody),
            }
        }
    };
    let gauge = &app.ctx.metrics.front_door.unverified_bodies;
    gauge.inc();
    let deadline = app.ctx.config.ingest.front_door.unverified_body_timeout;
    let (parts, body) = req.into_parts();
    let got = read(body, limit, deadline).await;
    gauge.dec();
    drop(place);
    let body = match got {
        Ok(body) => body,
        Err(Unread::TooLarge) => return route.refuse(app, "too_large", too_large(limit)),
        Err(Unread::Broken(why)) => {
            let e = ApiError::bad_request(
                ApiErrorCode::InvalidBody,
                format!("the body could not be read: {why}"),
            );
            return route.refuse(app, "malformed", e);
        }
        Err(Unread::TimedOut) => {
            app.ctx
                .metrics
                .http
                .slow_clients
                .with_label_values(&["unverified_body"])
                .inc();
            let mut resp = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                ApiErrorCode::BodyTimeout,
                format!(
                    "the request body did not arrive within {} s",
                    deadline.as_secs()
                ),
            )
            .into_response();
            resp.headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
            return resp;
        }
    };
    if let Err(refusal) = route.verify(app, &parts.headers, &body) {
        return *refusal;
    }
    next.run(Request::from_parts(parts, Body::from(body))).await
}
