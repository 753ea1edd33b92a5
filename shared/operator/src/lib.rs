//! Hermes as an MCP server for operators (docs/operator-mcp.md): the tools through which an
//! operator, or a coding agent working for one, reads every conversation Hermes carries,
//! follows its events, sends messages and answers the tool calls that wait for a person.
//!
//! The protocol is `hermes-mcp-server`'s; this crate is the [`Operator`] tool set (the
//! fleet's handles and who calls), its catalog ([`catalog`]), the tools ([`tools`], one file
//! per group) and the stdio transport ([`stdio`], `hermes mcp serve`). Ingest serves the
//! same tool set over streamable HTTP at `POST /mcp`. Nothing is kept between calls, so any
//! replica answers any call. [`erase`] and [`parked`] are the operator actions the CLI
//! and the console share beyond it.

pub mod args;
pub mod catalog;
pub mod erase;
pub mod error;
pub mod parked;
pub mod stdio;
pub mod tools;

use hermes_mcp_server::{CallError, ServerInfo, ToolSet};
use hermes_runtime::Ctx;
use hermes_types::ids::ApiKeyId;
use serde_json::Value;

pub use catalog::Tool;
pub use error::{ErrorCode, ToolError};

/// What the server says of itself in `initialize`.
pub const SERVER_INFO: ServerInfo = ServerInfo {
    name: "hermes-operator",
    title: "Hermes operator",
    version: env!("CARGO_PKG_VERSION"),
    instructions: "You operate Hermes, a message router. conversations_list finds conversations (a \
        conversation is a session: one user's chat on one platform), messages_read pages through \
        one's history, channels_list shows the platforms and known chats, events_poll/events_wait \
        follow what happens from a cursor, messages_send writes to a chat, and \
        permissions_list_open/permissions_respond answer tool calls waiting for an operator.",
};

/// How a client reached the server (the `transport` label of the call metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// `hermes mcp serve`, owned by the client.
    Stdio,
    /// `POST /mcp` on ingest.
    Http,
}

impl Transport {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
        }
    }
}

/// Who calls: what `permissions_respond` records as the answer's author, and what per-caller
/// limits count against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The process owner of `hermes mcp serve`, who holds the database credentials.
    Stdio,
    /// The install's operator key (`API_SERVER_KEY`).
    OperatorKey,
    /// A key of `hermes api-keys` with the `operator` scope, known by its id: its shown
    /// prefix (`hk_` and four hex digits) is shared by many keys, so it never identifies one.
    Key { id: ApiKeyId },
}

impl Caller {
    /// The caller's identity as recorded and counted (`stdio`, `operator`, or `key:<key id>`):
    /// the author of an approval's answer, the owner of a send's handle and idempotency key,
    /// and the bucket of its send rate.
    pub fn name(&self) -> String {
        match self {
            Caller::Stdio => "stdio".into(),
            Caller::OperatorKey => "operator".into(),
            Caller::Key { id } => format!("key:{id}"),
        }
    }
}

/// The operator tool set of one caller: the fleet's handles, who calls, and how.
#[derive(Clone)]
pub struct Operator {
    pub ctx: Ctx,
    pub caller: Caller,
    pub transport: Transport,
}

impl Operator {
    /// The tool set for `caller` reaching the server over `transport`.
    pub fn new(ctx: Ctx, caller: Caller, transport: Transport) -> Self {
        Self {
            ctx,
            caller,
            transport,
        }
    }

    /// A connection to PostgreSQL.
    pub async fn db(&self) -> Result<hermes_db::Client, ToolError> {
        Ok(self.ctx.db.get().await?)
    }

    /// Count one call of `tool` (a name; `unknown` for none) with `outcome`.
    fn count(&self, tool: &str, outcome: &str) {
        self.ctx
            .metrics
            .operator
            .calls
            .with_label_values(&[self.transport.as_str(), tool, outcome])
            .inc();
    }
}

impl ToolSet for Operator {
    fn list(&self) -> Vec<Value> {
        Tool::ALL.iter().map(|t| t.listing()).collect()
    }

    async fn call(&self, name: &str, args: Value) -> Result<Value, CallError> {
        let Some(tool) = Tool::parse(name) else {
            self.count("unknown", "UNKNOWN_TOOL");
            return Err(CallError::UnknownTool(name.into()));
        };
        let result = tools::call(self, tool, args).await;
        match &result {
            Ok(_) => self.count(tool.name(), "ok"),
            Err(e) => {
                self.count(tool.name(), e.code.as_str());
                tracing::info!(
                    tool = tool.name(),
                    code = e.code.as_str(),
                    caller = %self.caller.name(),
                    "operator MCP call refused"
                );
            }
        }
        result.map_err(|e| CallError::Refused(e.refusal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operator_key_is_known_by_its_id_so_keys_sharing_a_prefix_stay_apart() {
        // Two keys whose shown prefixes could be the same `hk_1a2b`: their records,
        // handles, idempotency keys and send rates must never be one.
        let (a, b) = (ApiKeyId::new(), ApiKeyId::new());
        let (a_name, b_name) = (Caller::Key { id: a }.name(), Caller::Key { id: b }.name());
        assert_eq!(a_name, format!("key:{a}"));
        assert_ne!(a_name, b_name);
        assert_eq!(Caller::Stdio.name(), "stdio");
        assert_eq!(Caller::OperatorKey.name(), "operator");
    }
}
