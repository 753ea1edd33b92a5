//! Operator controls of model spending: `hermes killswitch on|off|status` (every model call
//! of every replica blocked at once; kept in PostgreSQL, so it survives a Redis restart, and
//! in Redis, where every call reads it: docs/operations.md) and `hermes workspaces secret …`
//! (workspace-level provider keys that override the global ones, docs/models-and-budgets.md).

use std::io::Read;

use anyhow::{Context, bail};
use clap::Subcommand;
use hermes_alerts::{AlertKind, Alerts};
use hermes_cache::Cache;
use hermes_config::{BackendKind, Config};
use hermes_db::{Db, workspaces};
use hermes_gateway::budget::Budgets;
use hermes_net::keyring::KeyRing;
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

#[derive(Subcommand)]
pub enum WorkspacesCommand {
    /// Workspace-level provider keys: a value overrides the global key of the same name
    /// for the workspace's agents; a cleared key hides the global one (e.g. clear
    /// ANTHROPIC_API_KEY to force Gemini dispatch). Applies within 30 s, no restart.
    #[command(subcommand)]
    Secret(SecretCommand),
}

#[derive(Subcommand)]
pub enum SecretCommand {
    /// Set a key; the value is read from standard input (kept out of shell history).
    Set {
        /// One of HERMES_API_KEY, OPENROUTER_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENAI_API_KEY.
        name: String,
        #[arg(long, default_value = "default")]
        workspace: String,
    },
    /// Clear a key for the workspace: the global value no longer applies there.
    Clear {
        name: String,
        #[arg(long, default_value = "default")]
        workspace: String,
    },
    /// Remove the workspace's own setting: the global value applies again.
    Unset {
        name: String,
        #[arg(long, default_value = "default")]
        workspace: String,
    },
    /// List the workspace's settings (names only, never values).
    List {
        #[arg(long, default_value = "default")]
        workspace: String,
    },
}

fn check_name(name: &str) -> anyhow::Result<()> {
    let known: Vec<&str> = BackendKind::KEY_PRIORITY
        .iter()
        .filter_map(|k| k.key_var())
        .collect();
    if !known.contains(&name) {
        bail!(
            "{name:?} is not a provider key (expected one of {})",
            known.join(", ")
        );
    }
    Ok(())
}

pub async fn workspaces_cmd(config: &Config, cmd: WorkspacesCommand) -> anyhow::Result<()> {
    let db = Db::new(&config.database_url, 1)?;
    db.check_schema().await?;
    let client = db.get().await?;
    let WorkspacesCommand::Secret(cmd) = cmd;
    let ws_id = |slug: String| {
        let client = &client;
        async move {
            workspaces::id_by_slug(client, &slug)
                .await?
                .with_context(|| format!("no workspace {slug:?}"))
        }
    };
    match cmd {
        SecretCommand::Set { name, workspace } => {
            check_name(&name)?;
            let keys = KeyRing::new(&config.router.secret_keys)
                .context("HERMES_SECRET_KEYS is not set: it encrypts workspace secrets at rest")?;
            let mut value = String::new();
            std::io::stdin()
                .read_to_string(&mut value)
                .context("reading the value from standard input")?;
            anyhow::ensure!(
                !value.trim().is_empty(),
                "no value on standard input (use `clear` to clear a key)"
            );
            let id = ws_id(workspace.clone()).await?;
            workspaces::set_secret(&client, id, &name, &value, Some(&keys)).await?;
            println!("{name} set for workspace {workspace}");
        }
        SecretCommand::Clear { name, workspace } => {
            check_name(&name)?;
            let id = ws_id(workspace.clone()).await?;
            // An empty value is no secret: clearing needs no key ring.
            workspaces::set_secret(&client, id, &name, "", None).await?;
            println!(
                "{name} cleared for workspace {workspace}: the global value no longer applies there"
            );
        }
        SecretCommand::Unset { name, workspace } => {
            check_name(&name)?;
            let id = ws_id(workspace.clone()).await?;
            if workspaces::unset_secret(&client, id, &name).await? {
                println!("{name} unset for workspace {workspace}: the global value applies");
            } else {
                println!("{name} had no workspace setting in {workspace}");
            }
        }
        SecretCommand::List { workspace } => {
            let id = ws_id(workspace.clone()).await?;
            let names = workspaces::secret_names(&client, id).await?;
            if names.is_empty() {
                println!("workspace {workspace} uses the global keys");
            }
            for (name, cleared) in names {
                println!(
                    "{name:<20} {}",
                    if cleared {
                        "cleared"
                    } else {
                        "set (overrides the global key)"
                    }
                );
            }
        }
    }
    Ok(())
}
