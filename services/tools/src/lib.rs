//! The tools stage: runs what models ask for and sends the results back to the llm stage.
//! Consumes `{ns}.tools`. At start it publishes its tools to the shared registry.

pub mod builtin;
mod handler;
pub mod registry;

use hermes_shared::config::ToolsSettings;
use hermes_shared::db::tool_registry;
use hermes_shared::{Ctx, stage};

pub use handler::ToolStage;
pub use registry::{Registry, Tool, ToolError};

/// The tools every replica runs, with the limits of `[tools]` in the configuration.
pub fn default_registry(settings: &ToolsSettings) -> Registry {
    Registry::default()
        .with(builtin::CurrentTime)
        .with(builtin::HttpFetch::new(&settings.http_fetch))
}

/// Run the tools stage until `ctx.stop`.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let registry = default_registry(&ctx.config.file.tools);
    let mut client = ctx.db.get().await?;
    tool_registry::publish(&mut client, &[builtin::TOOLSET], &registry.specs()).await?;
    drop(client);
    tracing::info!(
        tools = registry.specs().len(),
        "tools published to the registry"
    );
    stage::run(ctx.clone(), ToolStage::new(ctx, registry)).await;
    Ok(())
}
