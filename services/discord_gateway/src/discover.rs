//! Where the Gateway is and how many shards the bot needs: `GET /gateway/bot` with the bot
//! token (<https://discord.com/developers/docs/events/gateway#get-gateway-bot>), unless
//! `DISCORD_GATEWAY_URL` and `DISCORD_SHARD_COUNT` both say; and with it how many Identifies
//! Discord takes at once (`max_concurrency`) and how many session starts are left.

use std::time::Duration;

use anyhow::{Context as _, bail};
use hermes_config::Config;
use reqwest::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use url::Url;

/// The largest `/gateway/bot` answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// The most shards taken from Discord's recommendation: a bot in 2.5 million guilds.
const MAX_SHARDS: u32 = 2500;

/// The Gateway to connect to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gateway {
    /// Where new sessions connect.
    pub url: Url,
    /// How many shards the bot's guilds are split into.
    pub shards: u32,
    /// How many Identifies Discord takes per 5 seconds, one per bucket (1 when not asked).
    pub max_concurrency: u32,
    /// Session starts left, and when the window resets (`None`: not asked).
    pub starts: Option<Starts>,
}

/// `session_start_limit`: how many sessions the bot may still start, and when that resets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Starts {
    pub total: u32,
    pub remaining: u32,
    pub reset_after: Duration,
}

#[derive(Deserialize)]
struct GatewayBot {
    url: String,
    shards: u32,
    session_start_limit: Option<StartLimit>,
}

#[derive(Deserialize)]
struct StartLimit {
    total: u32,
    remaining: u32,
    reset_after: u64,
    max_concurrency: u32,
}

/// The most Identifies per 5 s taken from Discord (its largest bots have 16).
const MAX_CONCURRENCY: u32 = 64;

/// The Gateway as configured, asking Discord for what is not.
pub async fn gateway(config: &Config, token: &SecretString) -> anyhow::Result<Gateway> {
    let settings = &config.discord_gateway;
    if let (Some(url), Some(shards)) = (&settings.url, settings.shard_count) {
        return Ok(Gateway {
            url: url.clone(),
            shards,
            max_concurrency: 1,
            starts: None,
        });
    }
    let api = config
        .delivery
        .discord
        .api_url
        .as_str()
        .trim_end_matches('/');
    let http = hermes_net::http::client_builder(hermes_net::http::USER_AGENT)
        .timeout(Duration::from_secs(15))
        .build()?;
    let r = http
        .get(format!("{api}/gateway/bot"))
        .header("authorization", format!("Bot {}", token.expose_secret()))
        .send()
        .await
        .context("GET /gateway/bot")?;
    let status = r.status();
    if status == StatusCode::UNAUTHORIZED {
        bail!("Discord refused DISCORD_BOT_TOKEN (GET /gateway/bot: 401)");
    }
    if !status.is_success() {
        bail!("GET /gateway/bot answered {status}");
    }
    let body = r.bytes().await.context("GET /gateway/bot")?;
    if body.len() > MAX_ANSWER_BYTES {
        bail!("GET /gateway/bot answered {} bytes", body.len());
    }
    let bot: GatewayBot = serde_json::from_slice(&body).context("GET /gateway/bot's answer")?;
    let url = match &settings.url {
        Some(url) => url.clone(),
        None => Url::parse(&bot.url)
            .ok()
            .filter(|u| matches!(u.scheme(), "ws" | "wss"))
            .context("GET /gateway/bot named no ws(s) URL")?,
    };
    let shards = match settings.shard_count {
        Some(n) => n,
        None if (1..=MAX_SHARDS).contains(&bot.shards) => bot.shards,
        None => bail!("GET /gateway/bot recommended {} shards", bot.shards),
    };
    let limit = bot.session_start_limit;
    Ok(Gateway {
        url,
        shards,
        max_concurrency: limit
            .as_ref()
            .map_or(1, |l| l.max_concurrency.clamp(1, MAX_CONCURRENCY)),
        starts: limit.map(|l| Starts {
            total: l.total,
            remaining: l.remaining,
            reset_after: Duration::from_millis(l.reset_after),
        }),
    })
}
