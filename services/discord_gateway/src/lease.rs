//! Shard leases in PostgreSQL (`leases`, [`hermes_db::leases`]): a replica runs a shard's
//! session only while it holds the shard's lease, renews it every third of its time to live,
//! and closes the session at once when a renewal says another holder has it, or when it
//! could not renew before the lease would have expired. So two replicas never run one
//! shard, and a dead replica's shards are taken within one lease period.
//!
//! Beside each lease, a connected session holds a mark (`discord-ready-<id>/<count>`) for as
//! long: a re-shard closes the old shards only once every new shard's mark is held.

use std::time::Duration;

use hermes_db::leases;
use hermes_runtime::Ctx;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

use crate::protocol::Shard;

/// What asking for a lease gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// This replica holds it now; `took_over`: another replica held it and let it expire
    /// (it died, or lost PostgreSQL).
    Held { took_over: bool },
    /// Another replica holds it for this long yet, by PostgreSQL's clock.
    Taken { left: Duration },
}

/// This replica's view of the shard leases.
#[derive(Clone)]
pub struct Leases {
    ctx: Ctx,
    holder: String,
    ttl: Duration,
}

impl Leases {
    /// The leases `holder` takes for `ttl` each.
    pub fn new(ctx: Ctx, holder: String, ttl: Duration) -> Self {
        Self { ctx, holder, ttl }
    }

    /// How often a held lease is renewed, and at most how long a standby waits before it
    /// looks again (it looks as the holder's lease would expire, when that is sooner).
    pub fn every(&self) -> Duration {
        self.ttl / 3
    }

    /// Take `shard`'s lease if it is free or expired.
    pub async fn acquire(&self, shard: Shard) -> anyhow::Result<Asked> {
        let client = self.ctx.db.get().await?;
        let name = shard.lease_name();
        let before = leases::holder(&client, &name).await?;
        if !leases::acquire(&client, &name, &self.holder, self.ttl).await? {
            let left = before.map_or(Duration::ZERO, |(_, left)| left);
            return Ok(Asked::Taken { left });
        }
        Ok(Asked::Held {
            took_over: before.is_some_and(|(h, _)| h != self.holder),
        })
    }

    /// Renew `shard`'s lease: whether this replica still holds it.
    async fn renew(&self, shard: Shard) -> anyhow::Result<bool> {
        let client = self.ctx.db.get().await?;
        Ok(leases::acquire(&client, &shard.lease_name(), &self.holder, self.ttl).await?)
    }

    /// Give `shard`'s lease up, so another replica need not wait out its expiry.
    pub async fn release(&self, shard: Shard) {
        let released = async {
            let client = self.ctx.db.get().await?;
            anyhow::Ok(leases::release(&client, &shard.lease_name(), &self.holder).await?)
        };
        match timeout(self.every(), released).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(%shard, error = %e, "shard lease not released; it expires")
            }
            Err(_) => tracing::warn!(%shard, "shard lease not released in time; it expires"),
        }
    }

    /// Mark `shard`'s session connected (`up`) for as long as the lease lasts, renewed with
    /// it, or take the mark away.
    pub async fn mark_ready(&self, shard: Shard, up: bool) {
        let marked = async {
            let client = self.ctx.db.get().await?;
            let name = shard.ready_name();
            match up {
                true => leases::acquire(&client, &name, &self.holder, self.ttl).await?,
                false => leases::release(&client, &name, &self.holder).await?,
            };
            anyhow::Ok(())
        };
        match timeout(self.every(), marked).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(%shard, error = %e, "the session's mark not written"),
            Err(_) => tracing::warn!(%shard, "the session's mark not written in time"),
        }
    }

    /// Whether every shard of a count of `count` has its session connected somewhere (its
    /// mark held and not expired).
    pub async fn all_ready(&self, count: u32) -> anyhow::Result<bool> {
        let names: Vec<String> = (0..count)
            .filter_map(|id| Shard::new(id, count))
            .map(Shard::ready_name)
            .collect();
        let client = self.ctx.db.get().await?;
        Ok(leases::live(&client, &names).await? == names.len())
    }

    /// Renew `shard`'s lease until `lost` is cancelled, and its session's mark while `up`
    /// says it is connected; cancel `lost` when the lease is lost or cannot be renewed
    /// before it would expire.
    pub async fn keep(&self, shard: Shard, lost: CancellationToken, up: impl Fn() -> bool) {
        let every = self.every();
        // When the last renewal was *asked*: PostgreSQL's expiry counts from a moment after.
        let mut renewed = Instant::now();
        loop {
            tokio::select! {
                _ = lost.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            let asked = Instant::now();
            match timeout(every, self.renew(shard)).await {
                Ok(Ok(true)) => {
                    renewed = asked;
                    if up() {
                        self.mark_ready(shard, true).await;
                    }
                }
                Ok(Ok(false)) => {
                    tracing::warn!(%shard, "another replica holds this shard's lease: closing its session");
                    lost.cancel();
                    return;
                }
                Ok(Err(_)) | Err(_) if renewed.elapsed() + every >= self.ttl => {
                    tracing::error!(%shard, "the shard's lease could not be renewed before it expires: closing its session");
                    lost.cancel();
                    return;
                }
                Ok(Err(e)) => {
                    tracing::warn!(%shard, error = %e, "shard lease not renewed; trying again")
                }
                Err(_) => tracing::warn!(%shard, "shard lease renewal timed out; trying again"),
            }
        }
    }
}
