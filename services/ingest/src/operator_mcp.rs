//! `POST /mcp`: Hermes as an MCP server for operators (docs/operator-mcp.md) over the
//! streamable HTTP transport, stateless (crate::mcp_http), so every ingest replica serves
//! it without sticky sessions. The caller is the operator key (`API_SERVER_KEY`) or a key
//! with the `operator` scope (`hermes api-keys create --scope operator`); any other live key
//! is refused with `403` before the body is read. A key's request rate applies to every
//! request. The tools are `hermes-operator`'s.

use axum::extract::{Request, State};
use axum::http::{Extensions, HeaderMap};
use axum::response::{IntoResponse, Response};
use hermes_db::api_keys::KeyScope;
use hermes_operator::{Caller, Operator, SERVER_INFO, Transport};

use crate::AppState;
use crate::mcp_http::{self, Refused};
use crate::rest::{self, over_rate};
use crate::routes::{Surface, Verb};

/// The path of the operator server.
pub const PATH: &str = "/mcp";

/// The surface's routes.
pub fn surface() -> Surface {
    Surface::default()
        .route(Verb::Post, PATH, handle)
        .route(Verb::Get, PATH, not_allowed)
        .route(Verb::Delete, PATH, not_allowed)
}

/// Resolve the Bearer key of a request: the operator key, or a live key with the
/// `operator` scope, which takes one request from its rate.
async fn identify(
    app: &AppState,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Result<Caller, Refused> {
    match mcp_http::key_of(app, headers, extensions).await? {
        rest::Caller::Operator => Ok(Caller::OperatorKey),
        rest::Caller::Key(k) => {
            if !k.scopes.contains(&KeyScope::Operator) {
                return Err(Refused::Forbidden(
                    "this key lacks the operator scope: the operator MCP server needs API_SERVER_KEY or a key made with `hermes api-keys create --scope operator`",
                ));
            }
            if let Some(secs) = over_rate(app, &k).await {
                return Err(Refused::RateLimited(secs));
            }
            Ok(Caller::Key { id: k.id })
        }
    }
}

/// `GET` and `DELETE /mcp`: no stream to open, no session to end.
async fn not_allowed() -> Response {
    mcp_http::not_allowed(PATH)
}

/// `POST /mcp`. The key is checked before the body is read.
async fn handle(State(app): State<AppState>, req: Request) -> Response {
    let caller = match identify(&app, req.headers(), req.extensions()).await {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    let op = Operator::new(app.ctx.clone(), caller, Transport::Http);
    mcp_http::serve(&app, &SERVER_INFO, &op, req).await
}
