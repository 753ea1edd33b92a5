//! Where the Gateway is and how many shards the bot needs: `GET /gateway/bot` with the bot
//! token (<https://discord.com/developers/docs/events/gateway#get-gateway-bot>), unless
//! `DISCORD_GATEWAY_URL` and `DISCORD_SHARD_COUNT` both say.

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
}

#[derive(Deserialize)]
struct GatewayBot {
    url: String,
    shards: u32,
}

/// The Gateway as configured, asking Discord for what is not.
pub async fn gateway(config: &Config, token: &SecretString) -> anyhow::Result<Gateway> {
    let settings = &config.discord_gateway;
    if let (Some(url), Some(shards)) = (&settings.url, settings.shard_count) {
        return Ok(Gateway {
            url: url.clone(),
            shards,
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
    Ok(Gateway { url, shards })
}
