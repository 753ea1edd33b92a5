//! The router stage: decides who answers each inbound message, with what context and
//! which model chain, and records the AgentRun. Consumes `{ns}.router`, emits llm requests
//! through the outbox.

mod intent;
mod pipeline;
mod recall;
mod sanitize;
mod tool_gate;
mod tools;
mod trivial;

use hermes_shared::{Ctx, stage};

pub use pipeline::Router;

/// Run the router until `ctx.stop`.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let router = Router::new(ctx.clone());
    stage::run(ctx, router).await;
    Ok(())
}
