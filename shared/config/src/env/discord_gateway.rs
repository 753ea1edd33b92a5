//! The Discord Gateway connector, `hermes discord-gateway` (docs/channels.md, "Discord"):
//! where the Gateway is, how many shards the bot's guilds are split into, and how long a
//! replica's lease on a shard lasts. The bot token is `DISCORD_BOT_TOKEN`, shared with the
//! sender.

use std::time::Duration;

use url::Url;

use crate::discord_gateway::GatewayCompression;

use super::Unset::{Means, Value};
use super::{kinds, settings};

settings! {
    /// The Gateway connector.
    SETTINGS = [
        DISCORD_GATEWAY_URL: Url {
            kind: kinds::WS_URL,
            unset: Means("(asked of `GET /gateway/bot` on DISCORD_API_URL)"),
            secret: false,
            help: "the Discord Gateway's WebSocket URL; `?v=10&encoding=json` is added",
        },
        DISCORD_SHARD_COUNT: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Means("(Discord's recommendation, from `GET /gateway/bot`)"),
            secret: false,
            help: "how many shards the bot's guilds are split into; every replica of the connector must agree",
        },
        DISCORD_GATEWAY_COMPRESSION: GatewayCompression {
            kind: kinds::GATEWAY_COMPRESSION,
            unset: Value("zlib-stream"),
            secret: false,
            help: "the Gateway's transport compression: `zlib-stream` (one zlib context per connection; a busy shard's traffic shrinks several times) or `none`",
        },
        DISCORD_RESHARD_CHECK_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("3600"),
            secret: false,
            help: "how often the connector asks `GET /gateway/bot` whether Discord recommends another shard count, and re-shards when it does (not when DISCORD_SHARD_COUNT is set)",
        },
        DISCORD_SHARD_LEASE_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("30"),
            secret: false,
            help: "how long a connector replica's lease on a shard lasts (renewed every third of it); a dead replica's shards are taken over within it",
        },
    ]
}
