//! The tools a replica can run, behind one trait, and their publication in the shared
//! registry so the router knows what to offer.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hermes_types::model::ToolSpec;

use crate::approval::ApprovalRules;
use crate::mcp::McpHub;

/// A tool's failure, returned to the model as the tool result (never a crash).
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error("{0}")]
    Failed(String),
    /// The tool answered, and its answer is an error (an MCP result with `isError`): the
    /// server took the call and refused it, so the same call is refused again.
    #[error("{0}")]
    Refused(String),
    /// The tool's own deadline passed.
    #[error("{0}")]
    Timeout(String),
}

/// Boxed future of a tool call (tools are stored as trait objects).
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<String, ToolError>> + Send + 'a>>;

/// Upper bound of one tool call unless the tool says otherwise.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);

/// Something the model can call.
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    fn call<'a>(&'a self, arguments: &'a serde_json::Value) -> ToolFuture<'a>;

    /// How long the stage lets one call run before answering the model with a timeout.
    fn deadline(&self) -> Duration {
        DEFAULT_DEADLINE
    }

    /// Whether the tool acts on the host the tools service runs on (terminal, file
    /// patching, code execution, desktop): disabled in restricted engagement modes.
    fn local_host(&self) -> bool {
        false
    }

    /// The MCP server the tool belongs to (`None`: a built-in), named in its span.
    fn mcp_server(&self) -> Option<&str> {
        None
    }
}

/// The tools of this replica by name: the built-ins, then whatever the MCP servers
/// currently contribute; and which of them wait for an operator's approval.
#[derive(Clone, Default)]
pub struct Registry {
    tools: HashMap<String, Arc<dyn Tool>>,
    mcp: Option<Arc<McpHub>>,
    approvals: Arc<ApprovalRules>,
}

impl Registry {
    pub fn with(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.insert(tool.spec().name, Arc::new(tool));
        self
    }

    /// Add the tools of the MCP servers of `hub` (looked up at each call, so a server's
    /// `list_changed` is seen at once).
    pub fn with_mcp(mut self, hub: Arc<McpHub>) -> Self {
        self.mcp = Some(hub);
        self
    }

    /// Gate the tools `rules` name behind an operator's approval.
    pub fn with_approvals(mut self, rules: ApprovalRules) -> Self {
        self.approvals = Arc::new(rules);
        self
    }

    /// Which calls wait for an operator.
    pub fn approvals(&self) -> &ApprovalRules {
        &self.approvals
    }

    /// The built-in tools as (name, toolset), which `[tools] require_approval` may name.
    pub fn builtin_names(&self) -> Vec<(String, String)> {
        self.builtin_specs()
            .into_iter()
            .map(|s| (s.name, s.toolset))
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools
            .get(name)
            .cloned()
            .or_else(|| self.mcp.as_ref().and_then(|hub| hub.get(name)))
    }

    /// The specs of the built-in tools.
    pub fn builtin_specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = self.tools.values().map(|t| t.spec()).collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        specs
    }

    /// Stop the MCP servers behind this registry.
    pub fn shutdown(&self) {
        if let Some(hub) = &self.mcp {
            hub.shutdown();
        }
    }

    /// Every tool of this replica.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = self.builtin_specs();
        if let Some(hub) = &self.mcp {
            specs.extend(hub.specs());
        }
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        specs
    }
}
