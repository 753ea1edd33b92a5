//! The delivery stage: gets every answer to where it belongs and closes its run.
//! Consumes `{ns}.delivery`.

mod bookkeeping;
pub mod breaker;
mod handler;
pub mod rate_gate;
pub mod retry_policy;
pub mod senders;

use hermes_shared::{Ctx, stage};

pub use handler::DeliveryStage;

/// Run the delivery stage until `ctx.stop`.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    stage::run(ctx.clone(), DeliveryStage::new(ctx)?).await;
    Ok(())
}
