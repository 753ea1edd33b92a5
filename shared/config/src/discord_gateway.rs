//! The Discord Gateway connector's settings (docs/channels.md, "Discord"), read from the
//! environment by `hermes discord-gateway`.

use std::time::Duration;

use url::Url;

use crate::env::Reader;
use crate::env::discord_gateway::{
    DISCORD_GATEWAY_COMPRESSION, DISCORD_GATEWAY_URL, DISCORD_RESHARD_CHECK_SECS,
    DISCORD_SHARD_COUNT, DISCORD_SHARD_LEASE_SECS,
};

/// How the Gateway's payloads travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatewayCompression {
    /// `compress=zlib-stream`: one zlib context per connection.
    ZlibStream,
    /// Plain JSON text frames.
    None,
}

impl GatewayCompression {
    pub fn as_str(self) -> &'static str {
        match self {
            GatewayCompression::ZlibStream => "zlib-stream",
            GatewayCompression::None => "none",
        }
    }
}

/// Where the Gateway is and how its shards are held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscordGatewaySettings {
    /// `DISCORD_GATEWAY_URL`; `None`: asked of `GET /gateway/bot`.
    pub url: Option<Url>,
    /// `DISCORD_SHARD_COUNT`; `None`: Discord's recommendation from `GET /gateway/bot`.
    pub shard_count: Option<u32>,
    /// `DISCORD_SHARD_LEASE_SECS`: a shard lease's time to live.
    pub lease_ttl: Duration,
    /// `DISCORD_GATEWAY_COMPRESSION`.
    pub compression: GatewayCompression,
    /// `DISCORD_RESHARD_CHECK_SECS`: how often Discord's recommended shard count is asked.
    pub reshard_every: Duration,
}

pub(crate) fn read_discord_gateway(r: &mut Reader<'_>) -> Option<DiscordGatewaySettings> {
    let url = r.get(&DISCORD_GATEWAY_URL);
    let shard_count = r.get(&DISCORD_SHARD_COUNT);
    let lease_ttl = r.get(&DISCORD_SHARD_LEASE_SECS);
    let compression = r.get(&DISCORD_GATEWAY_COMPRESSION);
    let reshard_every = r.get(&DISCORD_RESHARD_CHECK_SECS);
    Some(DiscordGatewaySettings {
        url,
        shard_count,
        lease_ttl: lease_ttl?,
        compression: compression?,
        reshard_every: reshard_every?,
    })
}
