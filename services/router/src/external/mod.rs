//! External runs end (docs/agents.md, "When an external run ends"): every router replica
//! runs these sweeps each second. A run past its reply deadline gets the fallback reply
//! (`expiry`), an unacknowledged run is woken again on the re-wake schedule (`rewake`), and
//! an external agent silent past the presence window is marked OFFLINE (`presence`), and a
//! run held for a paused agent is released once the agent is ONLINE again (`release`). Each
//! sweep takes its rows `FOR UPDATE SKIP LOCKED` and writes its effects and messages in one
//! transaction with the outbox, so any number of replicas do each thing once, and a crash
//! leaves the work to the next tick.

pub mod expiry;
pub mod presence;
pub mod release;
pub mod rewake;

use std::time::Duration;

use hermes_runtime::Ctx;

use crate::periodic;

/// How often a replica sweeps: the most a deadline or a re-wake is late, plus the outbox
/// relay's hop.
pub const TICK: Duration = Duration::from_secs(1);

/// Rows taken per transaction (a full batch is followed at once by the next).
pub(crate) const BATCH: i64 = 100;

/// How often the external agents' metric series are started (a new agent's within this).
const TOUCH_EVERY: u32 = 60;

/// Sweep until `ctx.stop`.
pub async fn run(ctx: Ctx) {
    let mut every = periodic::ticker(TICK);
    let mut ticks = 0u32;
    while periodic::next(&ctx, &mut every).await {
        if ticks.is_multiple_of(TOUCH_EVERY) {
            touch_agents(&ctx).await;
        }
        ticks = ticks.wrapping_add(1);
        periodic::drain("external-run expiry", BATCH, || expiry::sweep(&ctx)).await;
        periodic::drain("external-run re-wake", BATCH, || rewake::sweep(&ctx)).await;
        periodic::drain("external-agent presence", BATCH, || presence::sweep(&ctx)).await;
        periodic::drain("held-run release", BATCH, || release::sweep(&ctx)).await;
    }
}

/// Start each external agent's metric series at 0 (docs/operations.md, metrics).
async fn touch_agents(ctx: &Ctx) {
    let keys = match ctx.db.get().await {
        Ok(client) => hermes_db::agents::external_keys(&client).await,
        Err(e) => Err(e),
    };
    match keys {
        Ok(keys) => keys.iter().for_each(|k| ctx.metrics.agents.touch_agent(k)),
        Err(e) => tracing::debug!(error = %e, "cannot list external agents for their metrics now"),
    }
}
