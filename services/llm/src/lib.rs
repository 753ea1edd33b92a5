//! The llm stage: turns a routed request into a model answer through the configured
//! provider, failing over along the tier's chain, and runs the single tool round.
//! Consumes `{ns}.llm`; emits tool requests and replies through the outbox.

mod chain;
mod handler;
mod memory;
pub mod providers;

use hermes_shared::{Ctx, stage};

pub use handler::{LlmStage, RETRY_MESSAGE, TOOL_DISCLAIMER};
pub use providers::Provider;

/// Run the llm stage until `ctx.stop`. Refuses to start without a usable provider.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let provider = Provider::from_config(&ctx.config)?;
    tracing::info!(provider = provider.name(), "llm stage starting");
    stage::run(ctx.clone(), LlmStage::new(ctx, provider)).await;
    Ok(())
}
