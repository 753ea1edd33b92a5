//! The metrics of the Discord Gateway connector, `hermes discord-gateway` (docs/operations.md,
//! "Discord Gateway"): which shards this replica holds and whose sessions are connected,
//! how sessions came back (resumed or identified anew), heartbeats Discord did not
//! acknowledge, leases taken over, closes that stop a shard, session starts left, re-shards,
//! and what became of each event.

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use crate::metrics::{counter, counter_vec, gauge, gauge_vec};

/// The Gateway connector's metric handles.
#[derive(Clone)]
pub struct DiscordGatewayMetrics {
    /// How many shards the bot is split into (0 before the connector knows).
    pub shard_count: IntGauge,
    /// How many shards this replica holds the lease on (the alert compares their sum over
    /// the replicas with the count).
    pub shards_held: IntGauge,
    /// 1 for each shard whose session is connected and identified or resumed.
    pub sessions: IntGaugeVec,
    /// Sessions resumed (op 6 answered `RESUMED`), by shard.
    pub resumes: IntCounterVec,
    /// Identifies sent (a new session), by shard.
    pub identifies: IntCounterVec,
    /// Heartbeats Discord did not acknowledge before the next was due (a zombied
    /// connection, closed and resumed), by shard.
    pub heartbeat_ack_misses: IntCounterVec,
    /// Shard leases this replica took that another holder had let expire, by shard.
    pub lease_takeovers: IntCounterVec,
    /// Closes that stop a shard instead of reconnecting, by close code.
    pub fatal_closes: IntCounterVec,
    /// Session starts Discord still allows in its current window
    /// (`session_start_limit.remaining`, counted down by this replica's Identifies).
    pub session_starts_remaining: IntGauge,
    /// Re-shards this replica completed (the old shards closed once every new one was up).
    pub reshards: IntCounter,
    /// `MESSAGE_CREATE` events by outcome: `accepted`, `duplicate`, `delayed`, `unconfirmed`
    /// (the broker did not take it: resumed to have it again), or why it was skipped
    /// (`not_addressed`, `own`, `bot`, `empty`, `invalid`).
    pub events: IntCounterVec,
}

impl DiscordGatewayMetrics {
    /// Register the connector's metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        Self {
            shard_count: gauge(
                r,
                "hermes_discord_gateway_shards",
                "How many shards the Discord bot is split into (DISCORD_SHARD_COUNT or Discord's recommendation); 0 before the connector knows.",
            ),
            shards_held: gauge(
                r,
                "hermes_discord_gateway_shards_held",
                "How many Discord shards this replica holds the lease on.",
            ),
            sessions: gauge_vec(
                r,
                "hermes_discord_gateway_sessions",
                "1 for each Discord shard whose Gateway session is connected (identified or resumed).",
                &["shard"],
            ),
            resumes: counter_vec(
                r,
                "hermes_discord_gateway_resumes_total",
                "Discord Gateway sessions resumed after a reconnect, by shard.",
                &["shard"],
            ),
            identifies: counter_vec(
                r,
                "hermes_discord_gateway_identifies_total",
                "Identifies sent to the Discord Gateway (a new session), by shard.",
                &["shard"],
            ),
            heartbeat_ack_misses: counter_vec(
                r,
                "hermes_discord_gateway_heartbeat_ack_misses_total",
                "Heartbeats the Discord Gateway did not acknowledge before the next was due (the connection is closed and resumed), by shard.",
                &["shard"],
            ),
            lease_takeovers: counter_vec(
                r,
                "hermes_discord_gateway_lease_takeovers_total",
                "Shard leases this replica took while another holder's had been in place, by shard.",
                &["shard"],
            ),
            fatal_closes: counter_vec(
                r,
                "hermes_discord_gateway_fatal_closes_total",
                "Discord Gateway closes that stop a shard instead of reconnecting (4004 authentication failed, 4010-4014), by close code.",
                &["code"],
            ),
            session_starts_remaining: gauge(
                r,
                "hermes_discord_gateway_session_starts_remaining",
                "Discord Gateway session starts (Identifies) left in Discord's current window, as GET /gateway/bot said and this replica's Identifies counted down; at 0 new sessions wait for the window's reset.",
            ),
            reshards: counter(
                r,
                "hermes_discord_gateway_reshards_total",
                "Re-shards this connector replica completed after Discord recommended another shard count.",
            ),
            events: counter_vec(
                r,
                "hermes_discord_gateway_events_total",
                "Discord MESSAGE_CREATE events by outcome: accepted (published with a broker confirm), duplicate, delayed (slow lane), unconfirmed (the broker did not take it: the session is resumed to have it again), or why skipped (not_addressed, own, bot, empty, invalid).",
                &["outcome"],
            ),
        }
    }
}
