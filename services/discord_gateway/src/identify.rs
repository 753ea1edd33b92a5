//! When a new session may Identify (<https://discord.com/developers/docs/events/gateway#identifying>):
//! Discord takes `max_concurrency` Identifies per 5 seconds, one per bucket
//! (`shard id % max_concurrency`), counted for the bot across every replica; and only as many
//! session starts a day as `session_start_limit` says.
//!
//! A bucket's turn is a lease in PostgreSQL (`discord-identify-<bucket>`), taken for the
//! 5 seconds under a holder name used once, so two replicas, or two shards of one process,
//! never Identify in one bucket within 5 s of each other. Within a process the shards of one
//! bucket queue on a lock, so they take their turns in order without asking PostgreSQL in a
//! loop.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use hermes_db::leases;
use hermes_runtime::Ctx;
use hermes_telemetry::DiscordGatewayMetrics;
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::discover::Starts;
use crate::protocol::Shard;

/// The window Discord counts `max_concurrency` Identifies in.
pub const IDENTIFY_GAP: Duration = Duration::from_secs(5);
/// Past a bucket lease's expiry before asking again: PostgreSQL's `now()` has moved on.
const MARGIN: Duration = Duration::from_millis(50);

/// The Identifies of this process.
pub struct IdentifyGate {
    ctx: Ctx,
    /// Discord's `max_concurrency`, as last asked (a re-shard asks again).
    max_concurrency: AtomicU32,
    /// One lock per bucket, made when first used.
    buckets: std::sync::Mutex<HashMap<u32, Arc<Mutex<()>>>>,
    /// Session starts left, when the window resets, and how many a window has.
    starts: Mutex<Option<(u32, Instant, u32)>>,
    metrics: DiscordGatewayMetrics,
}

/// What asking for a bucket's turn gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Turn {
    /// Identify now.
    Go,
    /// Another Identify of the bucket was less than 5 s ago: ask again after this.
    Wait(Duration),
}

impl IdentifyGate {
    /// The gate of a bot whose Gateway allows `max_concurrency` and `starts`.
    pub fn new(
        ctx: Ctx,
        max_concurrency: u32,
        starts: Option<Starts>,
        metrics: DiscordGatewayMetrics,
    ) -> Self {
        if let Some(s) = starts {
            metrics.session_starts_remaining.set(i64::from(s.remaining));
        }
        Self {
            ctx,
            max_concurrency: AtomicU32::new(max_concurrency.max(1)),
            buckets: std::sync::Mutex::default(),
            starts: Mutex::new(
                starts.map(|s| (s.remaining, Instant::now() + s.reset_after, s.total)),
            ),
            metrics,
        }
    }

    /// Take Discord's `max_concurrency` as asked again (`GET /gateway/bot`).
    pub fn set_max_concurrency(&self, max_concurrency: u32) {
        (self.max_concurrency).store(max_concurrency.max(1), Ordering::Relaxed);
    }

    /// Wait for `shard`'s turn to Identify.
    pub async fn wait(&self, shard: Shard) {
        self.wait_for_starts(shard).await;
        let bucket = shard.bucket(self.max_concurrency.load(Ordering::Relaxed));
        let lock = match self.buckets.lock() {
            Ok(mut b) => b.entry(bucket).or_default().clone(),
            Err(_) => Arc::default(),
        };
        let _turn = lock.lock().await;
        loop {
            match self.turn(bucket).await {
                Ok(Turn::Go) => return,
                Ok(Turn::Wait(left)) => tokio::time::sleep(left + MARGIN).await,
                Err(e) => {
                    // Without PostgreSQL the process still keeps its own Identifies apart.
                    tracing::warn!(%shard, error = %e, "cannot take the Identify turn in PostgreSQL: waiting the full window");
                    tokio::time::sleep(IDENTIFY_GAP).await;
                    return;
                }
            }
        }
    }

    /// Ask for `bucket`'s turn once.
    pub async fn turn(&self, bucket: u32) -> anyhow::Result<Turn> {
        let client = self.ctx.db.get().await?;
        let name = format!("discord-identify-{bucket}");
        let once = uuid::Uuid::now_v7().simple().to_string();
        if leases::acquire(&client, &name, &once, IDENTIFY_GAP).await? {
            return Ok(Turn::Go);
        }
        let left = leases::holder(&client, &name).await?;
        Ok(Turn::Wait(left.map_or(Duration::ZERO, |(_, left)| left)))
    }

    /// When Discord's count of session starts is spent, wait for its window to reset; count
    /// this start down.
    async fn wait_for_starts(&self, shard: Shard) {
        let mut starts = self.starts.lock().await;
        if let Some((remaining, reset, total)) = starts.as_mut() {
            if *remaining == 0 {
                tracing::warn!(
                    %shard,
                    reset_in = ?reset.saturating_duration_since(Instant::now()),
                    "no Discord session starts left: waiting for the window to reset"
                );
                tokio::time::sleep_until(*reset).await;
                // A new window, of a day (Discord's), as full as the last began.
                *remaining = (*total).max(1);
                *reset += Duration::from_secs(24 * 3600);
            }
            *remaining -= 1;
            self.metrics
                .session_starts_remaining
                .set(i64::from(*remaining));
        }
    }
}
