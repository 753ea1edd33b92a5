//! Who calls the agent MCP surface: the Bearer key is resolved as on every route (the
//! operator key, or a key of `hermes api-keys`, cached briefly) and takes one request from
//! the key's request rate when it has one. The agent the key is linked to
//! (`hermes api-keys create --agent`) is the caller's identity; a key without one may
//! speak the protocol (initialize, list the tools) but every tool refuses it. A JWT bearer
//! verified by the front door (docs/agents.md, "JWT bearers") speaks for the agent in its `sub`.

use axum::http::{Extensions, HeaderMap};
use hermes_types::ids::AgentId;

use crate::AppState;
use crate::front_door::Screened;
use crate::mcp_http::{self, Refused};
use crate::rest::{Caller, over_rate};

/// An authenticated caller of the surface.
#[derive(Clone, Copy, Debug)]
pub struct Identity {
    /// The agent the key speaks for (`None`: not linked; tools answer UNAUTHORIZED).
    pub agent: Option<AgentId>,
}

/// Resolve the Bearer key of a request and take one request from its rate.
pub async fn identify(
    app: &AppState,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Result<Identity, Refused> {
    if let Some(Screened::Agent(agent)) = extensions.get::<Screened>() {
        return Ok(Identity {
            agent: Some(*agent),
        });
    }
    match mcp_http::key_of(app, headers, extensions).await? {
        Caller::Operator => Ok(Identity { agent: None }),
        Caller::Key(k) => {
            if let Some(secs) = over_rate(app, &k).await {
                return Err(Refused::RateLimited(secs));
            }
            Ok(Identity { agent: k.agent_id })
        }
    }
}
