//! `hermes killswitch on|off|status`: every model call of every replica blocked at once;
//! kept in PostgreSQL, so it survives a Redis restart, and in Redis, where every call reads
//! it (docs/operations.md, "The killswitch").

use anyhow::Context;
use clap::Subcommand;
use hermes_alerts::{AlertKind, Alerts};
use hermes_cache::Cache;
use hermes_config::Config;
use hermes_db::Db;
use hermes_gateway::budget::Budgets;
use hermes_telemetry::Metrics;

#[derive(Subcommand)]
pub enum KillswitchCommand {
    /// Block every model call of the fleet now (users get a "paused" reply, credits refunded).
    On {
        /// Why, shown by `status` and logged.
        #[arg(long, default_value = "manual")]
        reason: String,
    },
    /// Let model calls through again.
    Off,
    /// Show the killswitch and today's spend against LLM_GLOBAL_DAILY_BUDGET_USD.
    Status,
}

pub async fn killswitch(config: &Config, cmd: KillswitchCommand) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    let cache = Cache::new(&config.redis_url, config.namespace.clone(), metrics.clone())?;
    let alerts = Alerts::new(&config.alerts, cache.clone(), metrics.clone());
    let db = Db::new(&config.database_url, 1)?;
    if let Err(e) = db.check_schema().await {
        // Go on: with PostgreSQL away `on` still stops the fleet through Redis (and says
        // it is not durable), and `status` reads Redis.
        eprintln!("warning: {e}");
    }
    let budgets = Budgets::new(cache, Some(db), metrics, config);
    match cmd {
        KillswitchCommand::On { reason } => {
            let done = budgets.killswitch_on(&reason).await;
            if let Err(e) = &done {
                // Redis is written even when PostgreSQL is not: the fleet may be stopped
                // already, but the switch is not durable until this command succeeds.
                eprintln!("killswitch not on everywhere ({e}); run the command again");
            }
            done.context("the killswitch is kept in PostgreSQL and Redis")?;
            alerts
                .send(
                    AlertKind::KillswitchOn,
                    "",
                    &format!("killswitch turned on ({reason}): every model call is blocked"),
                )
                .await;
            println!("killswitch ON: every model call is blocked until `hermes killswitch off`");
        }
        KillswitchCommand::Off => {
            let was = budgets
                .killswitch_off()
                .await
                .context("the killswitch is kept in PostgreSQL and Redis")?;
            println!(
                "killswitch OFF{}",
                if was { "" } else { " (it was not on)" }
            );
        }
        KillswitchCommand::Status => {
            let s = budgets
                .status()
                .await
                .context("neither Redis nor PostgreSQL answered")?;
            match &s.killswitch {
                Some(k) => println!("killswitch ON since {} ({})", k.on_since, k.reason),
                None => println!("killswitch off"),
            }
            match s.cap_micro_usd {
                Some(cap) => {
                    let cap = cap as f64 / 1_000_000.0;
                    println!(
                        "spent today (UTC) ${:.6} of ${cap:.2} ({:.1}%){}",
                        s.spent_today_usd,
                        100.0 * s.spent_today_usd / cap.max(f64::MIN_POSITIVE),
                        if s.spent_today_usd >= cap {
                            " — cap reached: calls blocked until midnight UTC"
                        } else {
                            ""
                        }
                    );
                }
                None => println!(
                    "spent today (UTC) ${:.6} (no cap: LLM_GLOBAL_DAILY_BUDGET_USD not set)",
                    s.spent_today_usd
                ),
            }
        }
    }
    Ok(())
}
