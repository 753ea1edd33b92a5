//! Presence towards the Forge (docs/agents.md, "Presence towards the Forge"): the contract
//! has an agent call `agents.me` on start, then `agents.heartbeat` on a timer (ONLINE, BUSY
//! to pause the dispatcher, OFFLINE when it goes away). The tools stage holds the Forge's MCP
//! session, so it does this too; a lease in PostgreSQL makes one replica of the fleet send
//! the heartbeats, not every replica.
//!
//! Read top to bottom: every interval, take or renew the lease; the holder learns who it is
//! (`agents.me`, once), counts the agent's open Forge runs against its `maxConcurrent`, and
//! sends ONLINE or BUSY. Between intervals the holder counts again every [`CHANGE_CHECK`] and
//! sends at once when the status changed, so a run that closes frees the Forge's dispatcher
//! within a second, not at the next minute's heartbeat. On a graceful stop the holder sends
//! OFFLINE and gives the lease up.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use hermes_db::{forge_presence, leases};
use hermes_runtime::Ctx;
use hermes_types::agent::AgentStatus;
use hermes_types::model::FORGE_MCP_SERVER;
use hermes_types::sync;
use serde_json::{Value, json};

use crate::forge::{Refused, call, counter, forge_tool};
use crate::registry::Registry;

/// The contract's presence tools.
const ME: &str = "agents.me";
const HEARTBEAT: &str = "agents.heartbeat";

/// How many intervals a lease outlives its last renewal: a holder that misses one renewal
/// (a slow database) keeps it; a crashed one is replaced within this many intervals.
const LEASE_INTERVALS: u32 = 3;

/// How soon to look again while the Forge's presence tools are not registered yet (its
/// session is still connecting), so the first heartbeat does not wait a whole interval.
const NOT_CONNECTED_RETRY: Duration = Duration::from_secs(1);

/// How often the holder counts its open Forge runs between heartbeats, to send a change of
/// status (BUSY to ONLINE, ONLINE to BUSY) without waiting for the interval. A count is one
/// indexed query; nothing is sent while the status stays.
const CHANGE_CHECK: Duration = Duration::from_secs(1);

/// The Forge agent this install's Forge key speaks for, as `agents.me` answered.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Me {
    id: String,
    profile_key: String,
    /// `maxConcurrent`: at this many open runs the agent is BUSY.
    max_concurrent: i64,
}

impl Me {
    /// Read `agents.me`'s answer: the agent row itself, or under `agent`.
    fn parse(answer: &str) -> Result<Self, Refused> {
        let parsed: Value = serde_json::from_str(answer)
            .map_err(|_| Refused(format!("{ME} did not answer JSON")))?;
        let row = parsed
            .get("agent")
            .filter(|a| a.is_object())
            .unwrap_or(&parsed);
        let text = |key: &str| row.get(key).and_then(Value::as_str).map(str::to_owned);
        let (Some(id), Some(profile_key)) = (text("id"), text("profileKey")) else {
            return Err(Refused(format!("{ME} answered no id and profileKey")));
        };
        Ok(Self {
            id,
            profile_key,
            // A Forge that sends none leaves one run at a time, its own default.
            max_concurrent: row
                .get("maxConcurrent")
                .and_then(Value::as_i64)
                .filter(|n| *n > 0)
                .unwrap_or(1),
        })
    }

    /// The presence to send with `open` Forge runs of this agent open.
    fn status(&self, open: i64) -> AgentStatus {
        if open >= self.max_concurrent {
            AgentStatus::Busy
        } else {
            AgentStatus::Online
        }
    }
}

/// One replica's presence towards the Forge.
struct Presence {
    ctx: Ctx,
    registry: Arc<RwLock<Registry>>,
    /// The lease's name: one per namespace and Forge MCP server.
    lease: String,
    /// This replica, as the lease's holder.
    holder: String,
    every: Duration,
    me: Option<Me>,
    held: bool,
    /// The status the Forge last took from this replica.
    sent: Option<AgentStatus>,
}

/// Send presence to the Forge until `ctx.stop`, then OFFLINE if this replica was sending.
/// Returns once the OFFLINE heartbeat was tried, so the caller may then close the session.
pub async fn run(ctx: Ctx, registry: Arc<RwLock<Registry>>) {
    let every = ctx.config.forge.heartbeat;
    let mut presence = Presence {
        lease: format!(
            "{}:forge-presence:{FORGE_MCP_SERVER}",
            ctx.config.namespace.as_str()
        ),
        holder: format!("{}:{}", std::process::id(), uuid::Uuid::now_v7()),
        ctx,
        registry,
        every,
        me: None,
        held: false,
        sent: None,
    };
    'interval: loop {
        let wait = if presence.tick().await {
            every
        } else {
            NOT_CONNECTED_RETRY.min(every)
        };
        let next = Instant::now() + wait;
        loop {
            let check = (Instant::now() + CHANGE_CHECK).min(next);
            tokio::select! {
                () = presence.ctx.stop.cancelled() => break 'interval,
                () = tokio::time::sleep_until(check) => {}
            }
            if Instant::now() >= next {
                break;
            }
            presence.send_if_changed().await;
        }
    }
    presence.stop().await;
}

impl Presence {
    /// One interval's work; false when the Forge's presence tools are not registered yet.
    async fn tick(&mut self) -> bool {
        let registry = sync::read(&self.registry).clone();
        if forge_tool(&registry, HEARTBEAT).is_none() {
            return false;
        }
        self.held = match self.take_lease().await {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!(error = %e, "Forge presence lease not taken: no heartbeat this interval");
                false
            }
        };
        if !self.held {
            return true;
        }
        let me = match self.me(&registry).await {
            Ok(me) => me,
            Err(Refused(reason)) => {
                tracing::warn!(
                    reason,
                    "Forge presence: who this agent is is unknown; no heartbeat"
                );
                return true;
            }
        };
        let status = match self.open_runs(&me).await {
            Ok(open) => me.status(open),
            Err(e) => {
                // Presence still says the agent is up; the dispatcher's own count holds it.
                tracing::warn!(error = %e, "open Forge runs not counted; heartbeat sent as ONLINE");
                AgentStatus::Online
            }
        };
        self.heartbeat(&registry, status).await;
        true
    }

    /// Between intervals: the holder that knows who it is sends its status at once when it
    /// differs from the last one the Forge took.
    async fn send_if_changed(&mut self) {
        let Some(me) = self.me.clone().filter(|_| self.held) else {
            return;
        };
        let status = match self.open_runs(&me).await {
            Ok(open) => me.status(open),
            // The interval's heartbeat says what it can.
            Err(_) => return,
        };
        if self.sent != Some(status) {
            let registry = sync::read(&self.registry).clone();
            self.heartbeat(&registry, status).await;
        }
    }

    /// Take or renew the lease for [`LEASE_INTERVALS`] intervals.
    async fn take_lease(&self) -> anyhow::Result<bool> {
        let client = self.ctx.db.get().await?;
        let ttl = self.every * LEASE_INTERVALS;
        Ok(leases::acquire(&client, &self.lease, &self.holder, ttl).await?)
    }

    /// Who this agent is: `agents.me`, called once (until it answers).
    async fn me(&mut self, registry: &Registry) -> Result<Me, Refused> {
        if let Some(me) = &self.me {
            return Ok(me.clone());
        }
        let tool = forge_tool(registry, ME)
            .ok_or_else(|| Refused(format!("the Forge offers no {ME} tool")))?;
        let me = Me::parse(&call(&tool, ME, json!({}), &counter(&self.ctx)).await?)?;
        tracing::info!(
            forge_agent = me.id,
            profile_key = me.profile_key,
            max_concurrent = me.max_concurrent,
            "the Forge knows this agent"
        );
        self.me = Some(me.clone());
        Ok(me)
    }

    async fn open_runs(&self, me: &Me) -> anyhow::Result<i64> {
        let client = self.ctx.db.get().await?;
        Ok(forge_presence::open_runs(&client, &me.profile_key).await?)
    }

    /// Send `status`; counted by status and outcome, and remembered once the Forge took it.
    async fn heartbeat(&mut self, registry: &Registry, status: AgentStatus) {
        let outcome = match forge_tool(registry, HEARTBEAT) {
            Some(tool) => {
                let args = json!({"status": status.as_str()});
                call(&tool, HEARTBEAT, args, &counter(&self.ctx))
                    .await
                    .map(drop)
            }
            None => Err(Refused(format!("the Forge offers no {HEARTBEAT} tool"))),
        };
        let label = match &outcome {
            Ok(()) => {
                self.sent = Some(status);
                "sent"
            }
            Err(Refused(reason)) => {
                tracing::warn!(reason, status = status.as_str(), "Forge heartbeat failed");
                "failed"
            }
        };
        self.ctx
            .metrics
            .tools
            .forge_heartbeats
            .with_label_values(&[status.as_str(), label])
            .inc();
    }

    /// A graceful stop: the holder says OFFLINE and gives the lease up, so another replica
    /// takes it at its next interval instead of after the lease expires.
    async fn stop(&mut self) {
        if !self.held {
            return;
        }
        let registry = sync::read(&self.registry).clone();
        self.heartbeat(&registry, AgentStatus::Offline).await;
        let released = async {
            let client = self.ctx.db.get().await?;
            anyhow::Ok(leases::release(&client, &self.lease, &self.holder).await?)
        };
        if let Err(e) = released.await {
            tracing::warn!(error = %e, "Forge presence lease not released; it expires");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn me_is_read_from_the_row_or_under_agent_and_busy_at_max_concurrent() {
        let me =
            Me::parse(r#"{"id":"agt_victor","profileKey":"victor","maxConcurrent":3}"#).unwrap();
        assert_eq!(me.max_concurrent, 3);
        assert_eq!(me.status(2), AgentStatus::Online);
        assert_eq!(me.status(3), AgentStatus::Busy);
        let nested = Me::parse(r#"{"agent":{"id":"a","profileKey":"mizu"}}"#).unwrap();
        assert_eq!(
            (nested.profile_key.as_str(), nested.max_concurrent),
            ("mizu", 1)
        );
        assert!(Me::parse(r#"{"id":"a"}"#).is_err());
        assert!(Me::parse("not json").is_err());
    }
}
