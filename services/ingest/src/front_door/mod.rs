//! The front door against strangers (docs/security.md, "The front door under slow or hostile
//! clients"): what a request whose caller is not known yet may hold, so that no number of
//! strangers can take the slots of the callers Hermes knows.
//!
//! - Every request carries its client address ([`Client`], [`client`]): the connection's
//!   peer, or the `X-Forwarded-For` entry of the nearest untrusted hop behind
//!   `HERMES_TRUSTED_PROXY_HOPS` proxies.
//! - A Bearer key is resolved before the request takes one of `HERMES_MAX_IN_FLIGHT`
//!   ([`screen_bearer`] for the MCP surfaces; the API's own caller checks run outside the
//!   slot too), through the caches of [`keys`]: a key seen live, and, apart, a small cache
//!   of keys that name nothing; unknown keys are limited per client address.
//! - The routes whose signature covers the body read it in a small pool of their own under
//!   a short deadline and take a slot only once the signature holds ([`signed`]).

pub mod client;
pub mod keys;
pub mod signed;

use axum::extract::{Request, State};
use axum::http::header::CONNECTION;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hermes_runtime::http::{ApiError, ApiErrorCode};

use hermes_types::ids::AgentId;

use crate::AppState;
use crate::agent_mcp::jwt;
use crate::rest::{Caller, bearer_of, resolve};
pub use client::{Client, client};

/// A pool that shed a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    /// `HERMES_MAX_IN_FLIGHT`: requests being handled.
    InFlight,
    /// `HERMES_UNVERIFIED_BODIES`: bodies read before their signature is checked.
    UnverifiedBody,
}

impl Pool {
    /// The `pool` label of `hermes_http_shed_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Pool::InFlight => "in_flight",
            Pool::UnverifiedBody => "unverified_body",
        }
    }
}

/// The answer of a request shed because `pool` is full: 503 with `Retry-After`, counted.
pub fn shed(app: &AppState, pool: Pool) -> Response {
    app.ctx
        .metrics
        .front_door
        .shed
        .with_label_values(&[pool.as_str()])
        .inc();
    let message = match pool {
        Pool::InFlight => "ingest is at capacity; retry shortly",
        Pool::UnverifiedBody => {
            "too many unverified webhook bodies are being read at once; retry shortly"
        }
    };
    let mut resp = ApiError {
        retry_after: Some(1),
        ..ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ApiErrorCode::Unavailable,
            message,
        )
    }
    .into_response();
    if pool == Pool::UnverifiedBody {
        // Its body was not read: the connection cannot carry another request.
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// Middleware, outermost: the request's [`Client`] address, for the per-client limits.
pub async fn tag_client(State(app): State<AppState>, mut req: Request, next: Next) -> Response {
    let hops = app.ctx.config.ingest.front_door.trusted_proxy_hops;
    let found = client(req.headers(), req.extensions(), hops);
    req.extensions_mut().insert(Client(found));
    next.run(req).await
}

/// What [`screen_bearer`] found of a request's Bearer key, for the route's own caller check.
#[derive(Clone, Debug)]
pub enum Screened {
    /// A live key (or the operator key).
    Known(Caller),
    /// A JWT bearer of the agent MCP surface that verified: the agent it speaks for.
    Agent(AgentId),
}

/// Middleware of the MCP surfaces, outside their slot: resolve the Bearer key, so a
/// stranger's look-up never holds a slot, and refuse an unknown key there, in the surface's
/// own shape (JSON-RPC on `/mcp` and `/api/mcp/rpc`, the API's error on the REST alias
/// `/api/mcp/{tool}`). A live key is left for the surface's own check (scope, rate).
pub async fn screen_bearer(State(app): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let rest_alias = path.starts_with("/api/mcp/") && path != "/api/mcp/rpc";
    let unauthenticated = || {
        if rest_alias {
            ApiError::unauthorized().into_response()
        } else {
            crate::mcp_http::Refused::Unauthenticated.into_response()
        }
    };
    // A JWT bearer on the agent surface is verified here, with no look-up at all
    // (docs/agents.md, "JWT bearers").
    if let (Some(verifier), Some(token)) = (app.jwt.as_ref(), bearer_of(req.headers()))
        && path.starts_with("/api/mcp/")
        && jwt::looks_like_jwt(&token)
    {
        let now = chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
        let verified = verifier.verify(&token, now);
        let outcome = verified.map_or_else(jwt::JwtRefusal::as_str, |_| "accepted");
        app.ctx
            .metrics
            .agents
            .mcp_jwt
            .with_label_values(&[outcome])
            .inc();
        return match verified {
            Ok(agent) => {
                req.extensions_mut().insert(Screened::Agent(agent));
                next.run(req).await
            }
            Err(why) => {
                tracing::info!(refusal = why.as_str(), "JWT bearer refused");
                unauthenticated()
            }
        };
    }
    if let Some(key) = bearer_of(req.headers()) {
        let client = req.extensions().get::<Client>().and_then(|c| c.0);
        match resolve(&app, &key, client).await {
            Ok(Some(caller)) => {
                req.extensions_mut().insert(Screened::Known(caller));
            }
            Ok(None) => return unauthenticated(),
            Err(e) => return e.into_response(),
        }
    }
    next.run(req).await
}
