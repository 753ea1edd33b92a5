//! The Discord Gateway connector, `hermes discord-gateway` (docs/channels.md, "Discord"):
//! Discord pushes direct messages and channel messages only over its WebSocket Gateway
//! (<https://discord.com/developers/docs/events/gateway>), so this is the one intake that
//! holds a connection instead of answering webhooks.
//!
//! Each shard of the bot's guilds is leased in PostgreSQL ([`lease`]); a replica runs the
//! sessions of the shards it holds ([`shard`]), one connection at a time ([`connection`]),
//! the protocol's rules kept in a state machine ([`session`]) over the wire format
//! ([`protocol`]). Each `MESSAGE_CREATE` that addresses the bot is accepted as ingest
//! accepts a webhook's message ([`events`]): deduplicated by its id, published to the router
//! with a broker confirm. Every later stage is unchanged: the answer goes to the channel
//! through delivery's Discord sender, with the bot token.

pub mod compression;
pub mod connection;
pub mod discover;
pub mod events;
pub mod lease;
pub mod protocol;
pub mod session;
pub mod shard;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use hermes_config::GatewayCompression;
use hermes_runtime::Ctx;
use hermes_runtime::accept::Intake;
use hermes_telemetry::DiscordGatewayMetrics;
use prometheus::IntCounterVec;
use secrecy::SecretString;
use tokio::sync::Mutex;
use tokio::time::Instant;
use url::Url;

use crate::lease::Leases;
use crate::protocol::Shard;
use crate::session::Session;

/// The gap kept between two Identifies of this process: Discord allows `max_concurrency`
/// per 5 seconds, at least one, so one per 5 s is always within it.
pub const IDENTIFY_GAP: Duration = Duration::from_secs(5);

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
    /// The Identifies of this process, one per [`IDENTIFY_GAP`].
    pub identify: IdentifyGate,
    /// The connector's metrics.
    pub metrics: DiscordGatewayMetrics,
}

impl Shared {
    /// Count one on `counter` for `session`'s shard.
    fn count(&self, counter: &IntCounterVec, session: &Session) {
        counter.with_label_values(&[&session.shard().label()]).inc();
    }

    /// Whether `shard`'s session is connected.
    fn set_session(&self, shard: Shard, up: bool) {
        (self.metrics.sessions)
            .with_label_values(&[&shard.label()])
            .set(i64::from(up));
    }
}

/// Spaces this process's Identifies [`IDENTIFY_GAP`] apart.
#[derive(Default)]
pub struct IdentifyGate {
    last: Mutex<Option<Instant>>,
}

impl IdentifyGate {
    /// Wait for this process's turn to identify. Held while waiting, so turns are taken
    /// in order.
    pub async fn wait(&self) {
        let mut last = self.last.lock().await;
        if let Some(at) = *last {
            tokio::time::sleep_until(at + IDENTIFY_GAP).await;
        }
        *last = Some(Instant::now());
    }
}

/// Run the connector until `ctx.stop`: every shard's lease looked for, the sessions of
/// those held run, the leases handed back at the end.
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
        gateway = %gateway.url,
        "Discord Gateway connector started"
    );
    let shared = Arc::new(Shared {
        intake: Intake::new(ctx.clone()),
        token,
        gateway: gateway.url,
        compression: ctx.config.discord_gateway.compression,
        identify: IdentifyGate::default(),
        metrics,
    });
    let mut shards = tokio::task::JoinSet::new();
    for id in 0..gateway.shards {
        let shard = Shard::new(id, gateway.shards).context("a shard below the count")?;
        shards.spawn(shard::hold(
            shared.clone(),
            leases.clone(),
            shard,
            ctx.stop.clone(),
        ));
    }
    while let Some(ended) = shards.join_next().await {
        if let Ok(Some(code)) = ended {
            tracing::error!(
                code,
                reason = protocol::fatal_reason(code),
                "a shard is stopped; the connector stays up so that its metrics and alert tell"
            );
        }
    }
    // Every shard ended (refused for good). A service that returns is a failed one to the
    // process, and the process is still worth keeping for what its metrics report.
    ctx.stop.cancelled().await;
    Ok(())
}
