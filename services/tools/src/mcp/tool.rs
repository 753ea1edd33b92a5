//! A registered MCP tool or utility as a `Tool` of our registry.

use std::sync::Arc;
use std::time::Duration;

use hermes_types::model::ToolSpec;

use super::server::{Action, McpServer};
use crate::registry::{Tool, ToolFuture};

pub struct McpTool {
    pub(crate) server: Arc<McpServer>,
    pub(crate) spec: ToolSpec,
    pub(crate) action: Action,
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call<'a>(&'a self, arguments: &'a serde_json::Value) -> ToolFuture<'a> {
        Box::pin(self.server.invoke(&self.action, arguments))
    }

    /// The server's own `timeout` bounds the call (and counts toward its breaker); the stage's
    /// outer bound only has to be later.
    /// Declared per server in its configuration (`local_host`).
    fn local_host(&self) -> bool {
        self.server.settings.local_host
    }

    fn mcp_server(&self) -> Option<&str> {
        Some(&self.server.name)
    }

    fn deadline(&self) -> Duration {
        self.server.settings.call_timeout() + Duration::from_secs(5)
    }
}
