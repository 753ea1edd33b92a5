//! The router stage: decides who answers each inbound message, with what context and
//! which model chain, and records the AgentRun. Consumes `{ns}.router`; emits llm requests,
//! agent wakes and direct replies through the outbox.
//!
//! One file per step of the pipeline (`pipeline.rs` reads top to bottom): `sanitize`,
//! `trivial` and `intent` classify and clean text; `soul` and `recall` build the system
//! prompt; `messages` the turns; `tool_gate` and `tools` the tools offered; `dispatch`
//! the agent; `external` ends external agents' runs (deadline, re-wake, presence);
//! `sweeper` ends runs left open too long; `retention` removes expired rows;
//! `scheduler` queues the runs of scheduled jobs as they come due; `bursts` holds chat
//! messages in their conversation's quiet window and routes each burst as one turn;
//! `dreaming` queues each user's weekly dream once the week is over. `proxy` replaces all
//! of it on an edge install, forwarding every message to the upstream Hermes.

pub mod bursts;
pub mod delegation;
pub mod dispatch;
pub mod dreaming;
pub mod external;
pub mod intent;
pub mod media;
pub mod messages;
pub mod periodic;
pub mod pipeline;
pub mod proxy;
pub mod recall;
pub mod retention;
pub mod sanitize;
pub mod scheduler;
pub mod soul;
pub mod sweeper;
pub mod tool_gate;
mod tools;
pub mod trivial;

use hermes_runtime::{Ctx, stage};

pub use pipeline::Router;

/// Run the router until `ctx.stop`; in proxy mode (`GATEWAY_PROXY_URL`), the forwarder
/// instead ([`proxy`]).
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    if ctx.config.proxy.is_some() {
        return proxy::run(ctx).await;
    }
    let router = Router::new(ctx.clone())?;
    let sweeper = tokio::spawn(sweeper::run(ctx.clone()));
    let retention = tokio::spawn(retention::run(ctx.clone()));
    let scheduler = tokio::spawn(scheduler::run(ctx.clone()));
    let external = tokio::spawn(external::run(ctx.clone()));
    let bursts = tokio::spawn(bursts::run(ctx.clone()));
    let dreaming = tokio::spawn(dreaming::run(ctx.clone()));
    // Its commits are a few short statements each: group them (HERMES_COMMIT_GROUP).
    stage::run_grouped(ctx, router).await;
    let _ = sweeper.await;
    let _ = retention.await;
    let _ = scheduler.await;
    let _ = external.await;
    let _ = bursts.await;
    let _ = dreaming.await;
    Ok(())
}
