//! The stuck-run sweeper (docs/operations.md, runs that never end): a run still open
//! `HERMES_RUN_STUCK_AFTER_SECS` after it was created (its message parked where the run could
//! not be ended then, a message lost to an operator's purge) is closed as failed, refunded,
//! and its chat told, so no caller waits, no credit stays spent and no agent slot stays taken
//! for good. An external agent's run is ended by its reply deadline (`external/expiry.rs`);
//! it counts as stuck only that long after the deadline. Safe with several router replicas:
//! each run is closed by one of them.

use std::time::Duration;

use hermes_db::runs::close;
use hermes_runtime::Ctx;
use hermes_types::envelope::Envelope;
use hermes_types::ids::MessageId;
use hermes_types::model::{FailureCode, Platform, Reply, ReplyTo};

/// What a swept run's chat is told.
pub const SWEPT_TEXT: &str = "Sorry, I couldn't answer your message in time. Please send it again.";

/// Runs closed per sweep (the next sweep takes the rest).
const BATCH: i64 = 100;
/// Bits flipped in a swept run's id to name its failure reply: one reply per run, however
/// often it is published.
const SWEPT_REPLY_ID: u128 = 0x7377_6570_742d_7265_706c_7900_0000_0001;

/// Sweep until `ctx.stop`, every quarter of the bound (at most a minute).
pub async fn run(ctx: Ctx) {
    let bound = ctx.config.router.run_stuck_after;
    let mut every = tokio::time::interval((bound / 4).min(Duration::from_secs(60)));
    loop {
        tokio::select! {
            _ = ctx.stop.cancelled() => return,
            _ = every.tick() => {}
        }
        loop {
            match sweep(&ctx, bound).await {
                Ok(n) if n as i64 == BATCH => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "stuck-run sweep failed; trying again later");
                    break;
                }
            }
        }
    }
}

/// One batch: close and refund (`runs::close`), then tell the chats. Returns how many runs
/// it closed.
pub async fn sweep(ctx: &Ctx, bound: Duration) -> anyhow::Result<usize> {
    let mut client = ctx.db.get().await?;
    let tx = client.transaction().await?;
    let swept = close::stuck(&tx, bound, BATCH, SWEPT_TEXT).await?;
    tx.commit().await?;
    drop(client);
    for run in &swept {
        ctx.metrics.stages.runs_swept.inc();
        tracing::warn!(run_id = %run.id, platform = ?run.platform, refunded = run.refunded, "run open too long: ended as failed and refunded");
        let (Some(platform), Some(chat_id)) = (run.platform, &run.chat_id) else {
            continue;
        };
        if matches!(platform, Platform::Api | Platform::Rest) {
            continue;
        }
        let reply = Reply::failed(
            ReplyTo {
                platform,
                chat_id: chat_id.clone(),
                callback_url: None,
                quote: None,
                interaction: None,
            },
            FailureCode::Invalid,
            SWEPT_TEXT,
        );
        let mut env = Envelope::new(run.id, None, &reply);
        env.id = MessageId::derived(run.id.as_uuid(), SWEPT_REPLY_ID);
        if let Err(e) = ctx.bus.publish(&env).await {
            tracing::warn!(run_id = %run.id, error = %e, "cannot queue the swept run's notice");
        }
    }
    Ok(swept.len())
}
