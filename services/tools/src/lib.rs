//! The tools stage: runs what models ask for and sends the results back to the llm stage.
//! Consumes `{ns}.tools`. At start it connects to its MCP servers and publishes every tool
//! (built-in and MCP) to the shared registry; a server's tool-list change is published again.

pub mod builtin;
mod handler;
pub mod mcp;
pub mod policy;
pub mod registry;

use std::sync::Arc;

use hermes_shared::config::ToolsSettings;
use hermes_shared::db::tool_registry;
use hermes_shared::{Ctx, stage};
use tokio::sync::mpsc;

pub use handler::{Executed, Outcome, ToolStage, execute};
pub use registry::{Registry, Tool, ToolError};

use mcp::{McpHub, ToolsetChanged};

/// The built-in tools every replica runs, with the limits of `[tools]` in the configuration.
pub fn default_registry(settings: &ToolsSettings) -> Registry {
    Registry::default()
        .with(builtin::CurrentTime)
        .with(builtin::HttpFetch::new(&settings.http_fetch))
}

/// Run the tools stage until `ctx.stop`.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let (changes_tx, changes) = mpsc::unbounded_channel();
    let servers = &ctx.config.file.mcp_servers;
    let hub = Arc::new(McpHub::start(servers, &ctx.metrics.mcp_server_up, changes_tx).await);
    let registry = default_registry(&ctx.config.file.tools).with_mcp(hub.clone());

    let mut client = ctx.db.get().await?;
    let mut toolsets = vec![builtin::TOOLSET.to_owned()];
    toolsets.extend(McpHub::toolsets(servers));
    let toolsets: Vec<&str> = toolsets.iter().map(String::as_str).collect();
    tool_registry::publish(&mut client, &toolsets, &registry.specs()).await?;
    drop(client);
    tracing::info!(
        tools = registry.specs().len(),
        "tools published to the registry"
    );
    let publisher = tokio::spawn(publish_changes(ctx.clone(), changes));
    stage::run(ctx.clone(), ToolStage::new(ctx, registry)).await;
    hub.shutdown();
    publisher.abort();
    Ok(())
}

/// Publish each MCP toolset whose tools changed after start (`list_changed`, a restart
/// that found a different list).
async fn publish_changes(ctx: Ctx, mut changes: mpsc::UnboundedReceiver<ToolsetChanged>) {
    while let Some(change) = changes.recv().await {
        let result = async {
            let mut client = ctx.db.get().await?;
            tool_registry::publish(&mut client, &[&change.toolset], &change.specs).await?;
            anyhow::Ok(())
        }
        .await;
        match result {
            Ok(()) => tracing::info!(
                toolset = change.toolset,
                tools = change.specs.len(),
                "toolset republished"
            ),
            Err(e) => {
                tracing::warn!(toolset = change.toolset, error = %e, "toolset not republished")
            }
        }
    }
}
