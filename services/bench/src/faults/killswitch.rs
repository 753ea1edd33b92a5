//! The killswitch probe of a fault run with Redis faults: once the load is answered, the
//! killswitch is turned on (as `hermes killswitch on` does: PostgreSQL and Redis), Redis is
//! restarted (empty), and one more message is sent. It must be refused ("paused"), with no
//! model call, because the switch is kept in PostgreSQL (docs/models-and-budgets.md); then the
//! switch is turned off again.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hermes_cache::Cache;
use hermes_config::{Config, Namespace};
use hermes_db::Db;
use hermes_gateway::budget::Budgets;
use hermes_telemetry::Metrics;
use secrecy::SecretString;

use super::load::Seen;
use super::model::Calls;
use super::servers::{Server, Servers};
use crate::platforms::{TELEGRAM_SECRET, telegram_update};

/// The start of what a user reads while spending is paused.
const PAUSED: &str = "I'm paused";
/// The probe message's ledger token.
const TOKEN: &str = "ledger-killswitch";

/// What the probe needs of the run.
pub struct Probe<'a> {
    pub config: &'a Config,
    pub ns: &'a str,
    pub db: &'a Db,
    pub servers: &'a Servers,
    pub seen: &'a Arc<Seen>,
    pub calls: &'a Calls,
    /// Ingest's Telegram webhook.
    pub webhook: String,
    /// A linked sender with budget and credits.
    pub from: i64,
}

impl Probe<'_> {
    /// Whether the killswitch held across the Redis restart.
    pub async fn run(&self) -> anyhow::Result<bool> {
        let namespace = Namespace::parse(self.ns).map_err(anyhow::Error::msg)?;
        let redis = SecretString::from(self.servers.urls.redis.clone());
        let cache = Cache::new(&redis, namespace, Metrics::new())?;
        let budgets = Budgets::new(cache, Some(self.db.clone()), Metrics::new(), self.config);
        budgets
            .killswitch_on("fault run probe")
            .await
            .context("turning the killswitch on")?;
        self.servers.take_away(Server::Redis).await?;
        self.servers.give_back(Server::Redis, self.ns).await?;
        eprintln!("faults: killswitch on, Redis restarted empty; sending one more message");
        let held = self.send_and_read().await;
        // This process's own Redis connection was cut by the restart: its first calls fail
        // until it has reconnected.
        let mut tries = 0;
        while let Err(e) = budgets.killswitch_off().await {
            tries += 1;
            if tries == 20 {
                return Err(e).context("turning the killswitch off");
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let held = held?;
        eprintln!(
            "faults: the killswitch {} across the Redis restart",
            if held { "held" } else { "did NOT hold" }
        );
        Ok(held)
    }

    /// Send the probe and wait (bounded) for what its chat receives.
    async fn send_and_read(&self) -> anyhow::Result<bool> {
        let before = self.seen.sent().len();
        let body = telegram_update(9_999_999, self.from, &format!("hello {TOKEN}"));
        let client = reqwest::Client::new();
        let mut poll = tokio::time::interval(Duration::from_millis(100));
        tokio::time::timeout(Duration::from_secs(120), async {
            loop {
                poll.tick().await;
                let taken = client
                    .post(&self.webhook)
                    .header("x-telegram-bot-api-secret-token", TELEGRAM_SECRET)
                    .json(&body)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if taken {
                    break;
                }
            }
            loop {
                poll.tick().await;
                let sent = self.seen.sent();
                if let Some(s) = sent[before..].iter().find(|s| s.chat == self.from) {
                    let model_called = self.calls.for_token(TOKEN) > 0;
                    return Ok(s.text.starts_with(PAUSED) && !model_called);
                }
            }
        })
        .await
        .context("the probe message got no answer within 120 s")?
    }
}
