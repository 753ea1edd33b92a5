//! MCP servers as a source of tools: configuration comes from `[mcp_servers.<name>]`, each
//! enabled server is supervised by this replica, and its filtered tools are registered as
//! `mcp_<server>_<tool>` in the toolset `mcp-<server>`.

mod breaker;
mod client;
mod env;
mod llm_path;
pub mod naming;
mod sampling;
mod sampling_policy;
mod server;
mod supervisor;
mod tool;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hermes_config::McpServerSettings;
use hermes_telemetry::ToolMetrics;
use hermes_types::model::ToolSpec;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use client::McpError;
pub use env::{child_env, in_baseline};
pub use llm_path::GatewaySampling;
pub use sampling::{
    Complete, CompleteFuture, SamplingAnswer, SamplingError, SamplingRequest, ToolChoice,
};
pub use sampling_policy::as_run;
pub use server::McpServer;
pub use supervisor::ToolsetChanged;
pub use tool::McpTool;

use crate::approval::ApprovalRules;
use crate::registry::Tool;

/// Every MCP server of this replica.
pub struct McpHub {
    servers: Vec<Arc<McpServer>>,
    /// Per server: the bound of its first attempt and the flag that turns true after it.
    first: Vec<(Duration, watch::Receiver<bool>)>,
    /// Per server: its name and the flag that turns true once its first discovery is in
    /// the registry (or its first attempt failed).
    discovered: Vec<(String, watch::Receiver<bool>)>,
    stop: CancellationToken,
}

impl McpHub {
    /// Start supervising every enabled server of `servers` (disabled ones are never
    /// connected) and wait until each has made its first connection attempt, at most
    /// its `connect_timeout` (a reload swaps registries only once the new servers had
    /// their chance). See [`McpHub::spawn`] for the rest.
    pub async fn start(
        servers: &BTreeMap<String, McpServerSettings>,
        metrics: &ToolMetrics,
        changes: mpsc::UnboundedSender<ToolsetChanged>,
        llm: Option<Arc<dyn Complete>>,
        approvals: Arc<ApprovalRules>,
    ) -> Self {
        let hub = Self::spawn(servers, metrics, changes, llm, approvals);
        hub.first_attempts().await;
        hub
    }

    /// Start supervising every enabled server of `servers` without waiting for any: each
    /// server's tools are sent on `changes` as it connects (and whenever they change);
    /// sampling requests are answered by `llm` (absent: servers are told the client cannot
    /// sample), never showing the model a tool `approvals` gates.
    pub fn spawn(
        servers: &BTreeMap<String, McpServerSettings>,
        metrics: &ToolMetrics,
        changes: mpsc::UnboundedSender<ToolsetChanged>,
        llm: Option<Arc<dyn Complete>>,
        approvals: Arc<ApprovalRules>,
    ) -> Self {
        let stop = CancellationToken::new();
        let mut started = Vec::new();
        let mut first = Vec::new();
        let mut discovered = Vec::new();
        for (name, settings) in servers.iter().filter(|(_, s)| s.enabled) {
            let server = Arc::new(McpServer::new(
                name.clone(),
                settings.clone(),
                metrics,
                llm.clone(),
                approvals.clone(),
            ));
            let (first_tx, first_rx) = watch::channel(false);
            let (discovered_tx, discovered_rx) = watch::channel(false);
            tokio::spawn(supervisor::supervise(
                server.clone(),
                changes.clone(),
                first_tx,
                discovered_tx,
                stop.child_token(),
            ));
            discovered.push((name.clone(), discovered_rx));
            first.push((
                settings.connect_deadline() + Duration::from_secs(1),
                first_rx,
            ));
            started.push(server);
        }
        Self {
            servers: started,
            first,
            discovered,
            stop,
        }
    }

    /// Wait until every server's first discovery is published to the registry, or its
    /// first attempt failed, at most `bound` in all; the names of the servers still
    /// missing then. A flag whose sender is gone (its change dropped unpublished, the
    /// supervisor stopped) counts as settled.
    pub async fn discovered_within(&self, bound: Duration) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + bound;
        let waits = self.discovered.iter().map(|(name, rx)| {
            let mut rx = rx.clone();
            async move {
                let settled = tokio::time::timeout_at(deadline, rx.wait_for(|done| *done))
                    .await
                    .is_ok();
                (!settled).then(|| name.clone())
            }
        });
        futures_util::future::join_all(waits)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Wait until every server has made its first connection attempt, each at most its
    /// `connect_timeout` and a second.
    pub async fn first_attempts(&self) {
        let waits = self.first.iter().map(|(bound, rx)| {
            let mut rx = rx.clone();
            let bound = *bound;
            async move {
                let _ = tokio::time::timeout(bound, rx.wait_for(|done| *done)).await;
            }
        });
        futures_util::future::join_all(waits).await;
    }

    /// The toolsets of the enabled servers of `servers`: what a replica keeps in the
    /// registry at start (the rest is gone from the configuration or disabled).
    pub fn enabled_toolsets(servers: &BTreeMap<String, McpServerSettings>) -> Vec<String> {
        servers
            .iter()
            .filter(|(_, s)| s.enabled)
            .map(|(n, _)| naming::toolset(n))
            .collect()
    }

    /// The toolsets of every configured server, enabled or not (a reload publishes them
    /// all so a disabled server's old entries disappear).
    pub fn toolsets(servers: &BTreeMap<String, McpServerSettings>) -> Vec<String> {
        servers.keys().map(|n| naming::toolset(n)).collect()
    }

    /// The tool registered as `name`, if a server has it.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.servers.iter().find_map(|server| {
            server
                .registered()
                .into_iter()
                .find(|r| r.spec.name == name)
                .map(|r| {
                    Arc::new(McpTool {
                        server: server.clone(),
                        spec: r.spec,
                        action: r.action,
                    }) as Arc<dyn Tool>
                })
        })
    }

    /// Every registered MCP tool.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.servers
            .iter()
            .flat_map(|s| s.registered().into_iter().map(|r| r.spec))
            .collect()
    }

    /// Stop every supervisor (stdio children are killed with their sessions).
    pub fn shutdown(&self) {
        self.stop.cancel();
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
