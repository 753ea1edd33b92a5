//! The delivery stage: gets every answer to where it belongs and closes its run.
//! Consumes `{ns}.delivery` and, beside it, `{ns}.webhooks` (agent wakes), and watches the
//! parking queues for ops.

pub mod agent_webhooks;
mod bookkeeping;
pub mod breaker;
mod callback;
mod consent;
mod draft_plan;
mod handler;
mod parking_watch;
pub mod rate_gate;
mod sent_parts;
pub mod wake_envelope;
mod window;

use hermes_runtime::{Ctx, stage};

pub use agent_webhooks::AgentWebhookStage;
pub use handler::DeliveryStage;

/// Run the delivery stage until `ctx.stop`.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let stage = DeliveryStage::new(ctx.clone())?;
    let wakes = AgentWebhookStage::new(ctx.clone());
    let watch = tokio::spawn(parking_watch::run(ctx.clone()));
    tokio::join!(
        stage::run(ctx.clone(), stage),
        stage::run(ctx.clone(), wakes)
    );
    let _ = watch.await;
    Ok(())
}
