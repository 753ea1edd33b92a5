//! `POST /api/mcp/rpc`: the agent tools over the MCP streamable HTTP transport, stateless
//! (crate::mcp_http; the protocol is `hermes-mcp-server`'s). The key is checked before the
//! body is read; `GET` and `DELETE` are `405`: there is no stream and no session.

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use hermes_mcp_server::{CallError, ServerInfo, ToolSet};
use serde_json::Value;

use super::auth::{Identity, identify};
use super::tools::{self, Tool};
use crate::AppState;
use crate::mcp_http;

/// What the agent surface says of itself in `initialize`.
const INFO: ServerInfo = ServerInfo {
    name: "hermes-agents",
    title: "Hermes agent inbox",
    version: env!("CARGO_PKG_VERSION"),
    instructions: "You are an external agent of Hermes. On every wake: agent.inbox.list {status: unacked}, agent.inbox.ack {runId} (always), agent.context.bundle {issueId}, then answer with chat.appendMessage {threadId, body} (or a draft), or runs.fail.",
};

/// The agent tools as one caller sees them.
struct AgentTools<'a> {
    app: &'a AppState,
    identity: Identity,
}

impl ToolSet for AgentTools<'_> {
    fn list(&self) -> Vec<Value> {
        Tool::ALL.iter().map(|t| t.listing()).collect()
    }

    async fn call(&self, name: &str, args: Value) -> Result<Value, CallError> {
        let Some(tool) = Tool::parse(name) else {
            tools::count_unknown(self.app);
            return Err(CallError::UnknownTool(name.into()));
        };
        tools::call(self.app, self.identity, tool, args)
            .await
            .map_err(|e| CallError::Refused(e.refusal))
    }
}

/// `GET` and `DELETE /api/mcp/rpc`: no stream to open, no session to end.
pub async fn not_allowed() -> Response {
    mcp_http::not_allowed("/api/mcp/rpc")
}

/// `POST /api/mcp/rpc`. The key is checked before the body is read.
pub async fn handle(State(app): State<AppState>, req: Request) -> Response {
    let identity = match identify(&app, req.headers(), req.extensions()).await {
        Ok(i) => i,
        Err(r) => return r.into_response(),
    };
    let tools = AgentTools {
        app: &app,
        identity,
    };
    mcp_http::serve(&app, &INFO, &tools, req).await
}
