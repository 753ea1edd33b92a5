//! The llm stage: turns a routed request into a model answer through the configured
//! provider, failing over along the tier's chain, and hands tool calls to the tools stage for as many rounds as the run may take.
//! Consumes `{ns}.llm`; emits tool requests and replies through the outbox.

mod dreaming;
mod handler;
mod images;
mod memory;
mod stream;

use hermes_runtime::{Ctx, stage};

pub use handler::{LlmStage, RETRY_MESSAGE, TOOL_DISCLAIMER};
pub use hermes_gateway::Gateway;

/// Run the llm stage until `ctx.stop`. Refuses to start without a usable provider.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let gateway = Gateway::new(&ctx)?;
    let provider = gateway.backends().check()?;
    tracing::info!(%provider, "llm stage starting");
    stage::run(ctx.clone(), LlmStage::new(ctx, gateway)?).await;
    Ok(())
}
