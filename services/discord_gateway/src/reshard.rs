//! The shards of one count, and the move to another when Discord recommends it
//! (<https://discord.com/developers/docs/events/gateway#sharding>). Unless `DISCORD_SHARD_COUNT`
//! fixes the count, the connector asks `GET /gateway/bot` every `DISCORD_RESHARD_CHECK_SECS`,
//! and at once when Discord closes a shard with 4011 (sharding required).
//!
//! A new count starts beside the old one: its shards are leased and identified as usual,
//! while the old sessions go on. Once every new shard's session is connected somewhere (its
//! mark in PostgreSQL, [`crate::lease`]), the old shards close and hand their leases back. No
//! message falls between the two; one that both carry is accepted once, deduplicated by its
//! id as every Gateway message is.

use std::sync::Arc;
use std::time::Duration;

use hermes_runtime::Ctx;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::protocol::{self, Shard};
use crate::{Shared, discover, shard};

/// The close code that says the bot needs more shards.
const SHARDING_REQUIRED: u16 = 4011;
/// How often a re-shard in progress looks whether every new session is up.
const READY_POLL: Duration = Duration::from_millis(500);

/// The shards of one count on this replica: each one's lease looked for, its session run
/// while held.
struct Generation {
    count: u32,
    stop: CancellationToken,
    shards: JoinSet<Option<u16>>,
}

impl Generation {
    fn start(shared: &Arc<Shared>, count: u32, parent: &CancellationToken) -> Self {
        let stop = parent.child_token();
        let mut shards = JoinSet::new();
        for shard in (0..count).filter_map(|id| Shard::new(id, count)) {
            let leases = shared.leases.clone();
            shards.spawn(shard::hold(shared.clone(), leases, shard, stop.clone()));
        }
        Self {
            count,
            stop,
            shards,
        }
    }

    /// Close the sessions and wait until every lease is handed back.
    async fn end(mut self) {
        self.stop.cancel();
        while self.shards.join_next().await.is_some() {}
    }
}

/// The next shard of `generation` that ended, and its fatal close code; pending while there
/// is none to wait for.
async fn ended(generation: &mut Option<Generation>) -> Option<u16> {
    match generation.as_mut() {
        Some(g) if !g.shards.is_empty() => g.shards.join_next().await.and_then(|r| r.ok())?,
        _ => std::future::pending().await,
    }
}

/// Run the shards of `count`, re-sharding as Discord recommends, until `ctx.stop`.
pub async fn run(ctx: Ctx, shared: Arc<Shared>, count: u32) {
    let stop = ctx.stop.clone();
    let settings = &ctx.config.discord_gateway;
    let fixed = settings.shard_count.is_some();
    let mut current = Some(Generation::start(&shared, count, &stop));
    let mut next: Option<Generation> = None;
    let every = settings.reshard_every;
    let mut check = tokio::time::interval_at(Instant::now() + every, every);
    check.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut poll = tokio::time::interval(READY_POLL);
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = check.tick(), if !fixed => {
                consider(&ctx, &shared, &current, &mut next).await;
            }
            code = ended(&mut current) => {
                let Some(code) = code else { continue };
                tracing::error!(
                    code,
                    reason = protocol::fatal_reason(code),
                    "a shard is stopped; the connector stays up so that its metrics and alert tell"
                );
                if code == SHARDING_REQUIRED && !fixed {
                    consider(&ctx, &shared, &current, &mut next).await;
                }
            }
            code = ended(&mut next) => {
                if let (Some(code), Some(g)) = (code, next.take()) {
                    tracing::error!(
                        code,
                        reason = protocol::fatal_reason(code),
                        count = g.count,
                        "a shard of the new count was refused: the re-shard is given up"
                    );
                    g.end().await;
                }
            }
            _ = poll.tick(), if next.is_some() => {
                let Some(count) = next.as_ref().map(|g| g.count) else { continue };
                match shared.leases.all_ready(count).await {
                    Ok(true) => {
                        let old = std::mem::replace(&mut current, next.take());
                        let from = old.as_ref().map_or(0, |g| g.count);
                        if let Some(old) = old {
                            old.end().await;
                        }
                        shared.metrics.shard_count.set(i64::from(count));
                        shared.metrics.reshards.inc();
                        tracing::info!(from, to = count, "re-sharded: every new shard is up and the old ones are closed");
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot tell whether the new shards are up"),
                }
            }
        }
    }
    // Stopping: every shard's session closes and its lease is handed back.
    for g in [current, next].into_iter().flatten() {
        g.end().await;
    }
}

/// Ask Discord for its recommended count (and its `max_concurrency`, which the Identify
/// turns take at once); start that count beside the running one when it differs (and is not
/// already starting).
async fn consider(
    ctx: &Ctx,
    shared: &Arc<Shared>,
    current: &Option<Generation>,
    next: &mut Option<Generation>,
) {
    let recommended = match discover::gateway(&ctx.config, &shared.token).await {
        Ok(g) => {
            shared.identify.set_max_concurrency(g.max_concurrency);
            g.shards
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot ask Discord for its recommended shard count");
            return;
        }
    };
    let running = current.as_ref().map(|g| g.count);
    let starting = next.as_ref().map(|g| g.count);
    if Some(recommended) == running && starting.is_none() {
        return;
    }
    if Some(recommended) == starting {
        return;
    }
    if let Some(abandoned) = next.take() {
        abandoned.end().await;
    }
    if Some(recommended) == running {
        return;
    }
    tracing::info!(
        from = running,
        to = recommended,
        "Discord recommends another shard count: starting the new shards beside the old"
    );
    *next = Some(Generation::start(shared, recommended, &ctx.stop));
}
