//! The router's timed work (the job scheduler, bursts, the external-run sweeps, retention):
//! a ticker that waits for the next tick or the stop, and a sweep drained batch by batch.
//! A tick missed while a sweep ran is not made up for in a burst: the next one waits its turn.

use std::future::Future;
use std::time::Duration;

use hermes_runtime::Ctx;
use tokio::time::{Interval, MissedTickBehavior};

/// A ticker of `every`, its first tick at once.
pub fn ticker(every: Duration) -> Interval {
    let mut t = tokio::time::interval(every);
    t.set_missed_tick_behavior(MissedTickBehavior::Delay);
    t
}

/// Wait for `ticker`'s next tick: `false` when the process is stopping instead.
pub async fn next(ctx: &Ctx, ticker: &mut Interval) -> bool {
    tokio::select! {
        _ = ctx.stop.cancelled() => false,
        _ = ticker.tick() => true,
    }
}

/// Run `sweep` until it handles less than a full `batch` or fails (the next tick retries);
/// `what` names it in the warning of a failure.
pub async fn drain<F, Fut>(what: &str, batch: i64, sweep: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = anyhow::Result<usize>>,
{
    loop {
        match sweep().await {
            Ok(n) if n as i64 == batch => continue,
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(sweep = what, error = %format!("{e:#}"), "timed router work failed; trying again next tick");
                return;
            }
        }
    }
}
