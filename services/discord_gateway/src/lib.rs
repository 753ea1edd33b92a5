//! The Discord Gateway connector, `hermes discord-gateway` (docs/channels.md, "Discord"):
//! Discord pushes direct messages and channel messages only over its WebSocket Gateway
//! (<https://discord.com/developers/docs/events/gateway>), so this is the one intake that
//! holds a connection instead of answering webhooks.
//!
//! Each shard of the bot's guilds is leased in PostgreSQL ([`lease`]); a replica runs the
//! sessions of the shards it holds ([`shard`]), one connection at a time ([`connection`],
//! inflated by [`compression`]), the protocol's rules kept in a state machine ([`session`])
//! over the wire format ([`protocol`]), each new session waiting for its Identify turn
//! ([`identify`]), and the whole set moved to a new count when Discord recommends one
//! ([`reshard`]). Each `MESSAGE_CREATE` that addresses the bot is accepted as ingest
//! accepts a webhook's message ([`events`]): deduplicated by its id, published to the router
//! with a broker confirm. Every later stage is unchanged: the answer goes to the channel
//! through delivery's Discord sender, with the bot token.

pub mod compression;
pub mod connection;
pub mod discover;
pub mod events;
pub mod identify;
pub mod lease;
pub mod protocol;
pub mod reshard;
pub mod session;
pub mod shard;

use std::collections::HashSet;
use std::sync::Arc;

use anyhow::Context as _;
use hermes_config::GatewayCompression;
use hermes_runtime::Ctx;
use hermes_runtime::accept::Intake;
use hermes_telemetry::DiscordGatewayMetrics;
use prometheus::IntCounterVec;
use secrecy::SecretString;
use url::Url;

use crate::identify::IdentifyGate;
use crate::lease::Leases;
use crate::protocol::Shard;
use crate::session::Session;

/// What every shard of the process shares.
pub struct Shared {
    /// Accepts each message as ingest does.
    pub intake: Intake,
    /// `DISCORD_BOT_TOKEN`; only ever sent to the Gateway, never logged.
    pub token: SecretString,
    /// Where new sessions connect.
    pub gateway: Url,
    /// `DISCORD_GATEWAY_COMPRESSION`.
    pub compression: GatewayCompression,
    /// When a new session may Identify.
    pub identify: IdentifyGate,
    /// The connector's metrics.
    pub metrics: DiscordGatewayMetrics,
    /// The shard leases, and the marks of connected sessions.
    pub leases: Leases,
    /// The shards whose session is connected in this process.
    up: std::sync::Mutex<HashSet<Shard>>,
}

impl Shared {
    /// Count one on `counter` for `session`'s shard.
    fn count(&self, counter: &IntCounterVec, session: &Session) {
        counter.with_label_values(&[&session.shard().label()]).inc();
    }

    /// Whether `shard`'s session is connected: its gauge, and its mark in PostgreSQL (which
    /// a re-shard waits for), written beside the session so as not to hold it up.
    fn set_session(&self, shard: Shard, up: bool) {
        (self.metrics.sessions)
            .with_label_values(&[&shard.label()])
            .set(i64::from(up));
        let changed = match self.up.lock() {
            Ok(mut set) if up => set.insert(shard),
            Ok(mut set) => set.remove(&shard),
            Err(_) => false,
        };
        if changed {
            let leases = self.leases.clone();
            tokio::spawn(async move { leases.mark_ready(shard, up).await });
        }
    }

    /// Whether `shard`'s session is connected in this process.
    pub fn is_up(&self, shard: Shard) -> bool {
        self.up.lock().is_ok_and(|set| set.contains(&shard))
    }
}

/// Run the connector until `ctx.stop`: every shard's lease looked for, the sessions of
/// those held run, re-sharded when Discord recommends another count ([`reshard`]), the
/// leases handed back at the end.
pub async fn run(ctx: Ctx) -> anyhow::Result<()> {
    let token = (ctx.config.delivery.discord.bot_token.clone())
        .context("DISCORD_BOT_TOKEN is not set: the Gateway connector has no bot to connect as")?;
    let gateway = discover::gateway(&ctx.config, &token).await?;
    let metrics = ctx.metrics.discord_gateway.clone();
    metrics.shard_count.set(i64::from(gateway.shards));
    let holder = format!(
        "{}:{}",
        std::env::var("HOSTNAME").unwrap_or_else(|_| "hermes".into()),
        uuid::Uuid::now_v7().simple()
    );
    let leases = Leases::new(ctx.clone(), holder, ctx.config.discord_gateway.lease_ttl);
    tracing::info!(
        shards = gateway.shards,
        max_concurrency = gateway.max_concurrency,
        gateway = %gateway.url,
        "Discord Gateway connector started"
    );
    let identify = IdentifyGate::new(
        ctx.clone(),
        gateway.max_concurrency,
        gateway.starts,
        metrics.clone(),
    );
    let shared = Arc::new(Shared {
        intake: Intake::new(ctx.clone()),
        token,
        gateway: gateway.url,
        compression: ctx.config.discord_gateway.compression,
        identify,
        metrics,
        leases,
        up: std::sync::Mutex::default(),
    });
    reshard::run(ctx, shared, gateway.shards).await;
    Ok(())
}
