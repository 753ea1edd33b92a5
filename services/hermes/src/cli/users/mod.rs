//! `hermes users`: the people the fleet answers, their credits, memory and agent, and
//! erasing one (`erase.rs`); their platform senders are `hermes channels` (`../channels.rs`).

pub mod erase;

use anyhow::{Context, bail};
use clap::Subcommand;
use hermes_alerts::Alerts;
use hermes_cache::Cache;
use hermes_cache::soul;
use hermes_config::Config;
use hermes_db::{Db, agents, credits, memory, users};
use hermes_gateway::budget::Budgets;
use hermes_telemetry::Metrics;
use hermes_types::ids::{AgentId, UserId};
use hermes_types::model::Tier;
use serde_json::json;
use uuid::Uuid;

#[derive(Subcommand)]
pub enum UsersCommand {
    /// Create a user (prints its id and referral code).
    Create {
        /// Display name.
        #[arg(long)]
        name: Option<String>,
        /// Subscription tier: free, starter, pro or venue-growth (picks the model chain).
        #[arg(long, default_value = "free")]
        tier: Tier,
        /// Opening credit balance (one answered message costs router.credits_per_message).
        #[arg(long, default_value_t = 0)]
        credits: i64,
        /// Assign the user to this agent (profile key).
        #[arg(long, value_name = "PROFILE_KEY")]
        agent: Option<String>,
        #[arg(long, default_value = "default")]
        workspace: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show a user: profile, balance, channels, memory and the last ledger rows.
    Show {
        /// The user's id.
        id: UserId,
        #[arg(long)]
        json: bool,
    },
    /// Add (or with a negative amount, take) credits; every movement is a ledger row.
    Credit {
        /// The user's id.
        id: UserId,
        /// Credits to add; negative to take (never below zero).
        #[arg(allow_hyphen_values = true)]
        amount: i64,
        /// Why (kept on the ledger row).
        #[arg(long)]
        note: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Change a user's tier, name or agent (drops the cached soul).
    Set {
        /// The user's id.
        id: UserId,
        /// free, starter, pro or venue-growth.
        #[arg(long)]
        tier: Option<Tier>,
        /// Display name.
        #[arg(long)]
        name: Option<String>,
        /// Assign to this agent (profile key) of the user's own workspace, or `none` to
        /// unassign.
        #[arg(long, value_name = "PROFILE_KEY|none")]
        agent: Option<String>,
        /// The user's workspace (slug), checked when given: an agent of another workspace
        /// is never assigned.
        #[arg(long, value_name = "SLUG")]
        workspace: Option<String>,
    },
    /// Set a memory value (a structural key such as diet, or a free fact) and drop the cached soul.
    Remember {
        /// The user's id.
        id: UserId,
        /// A structural key (diet, favorite_areas, calorie_target, …) or a fact's label.
        key: String,
        /// The value (sanitized before it reaches a prompt).
        value: String,
    },
    /// Erase a person for a privacy request: every PostgreSQL row about the user and their
    /// linked senders (runs, messages, sessions, memory, ledger, statuses…) and every Redis
    /// key naming them (soul and history caches, rate and budget counters). Without `--yes`
    /// it only shows what would be removed.
    Erase {
        /// The user's id.
        id: UserId,
        /// Really erase (there is no undo).
        #[arg(long)]
        yes: bool,
    },
}

async fn agent_id(db: &Db, workspace: &str, key: &str) -> anyhow::Result<AgentId> {
    let client = db.get().await?;
    agents::by_key(&client, workspace, key)
        .await?
        .map(|a| a.id)
        .with_context(|| format!("no agent {key:?} in workspace {workspace:?}"))
}

/// The agent `key` of `user`'s own workspace: an explicit assignment never names another
/// workspace's agent (docs/security.md, "Keys and tenants"; the database refuses it too).
/// `workspace`, when given, must be the user's.
pub(crate) async fn agent_of_users_workspace(
    db: &Db,
    user: UserId,
    workspace: Option<&str>,
    key: &str,
) -> anyhow::Result<AgentId> {
    let client = db.get().await?;
    let user = users::get(&client, user)
        .await?
        .with_context(|| format!("no user {user}"))?;
    if let Some(slug) = workspace {
        let id = hermes_db::workspaces::id_by_slug(&client, slug)
            .await?
            .with_context(|| format!("no workspace {slug:?}"))?;
        anyhow::ensure!(
            id == user.workspace_id,
            "user {} is not in workspace {slug:?}: an agent is assigned only within its user's workspace",
            user.id
        );
    }
    agents::by_key_in(&client, user.workspace_id, key)
        .await?
        .map(|a| a.id)
        .with_context(|| {
            format!(
                "no agent {key:?} in the workspace of user {}: an agent is assigned only within its user's workspace",
                user.id
            )
        })
}

/// Drop the user's cached soul; a failure is reported, not fatal (it expires within the hour).
async fn invalidate_soul(config: &Config, user: UserId) {
    let metrics = Metrics::new();
    match Cache::new(&config.redis_url, config.namespace.clone(), metrics.clone()) {
        Ok(cache) => {
            let alerts = Alerts::new(&config.alerts, cache.clone(), metrics);
            if !soul::invalidate(&cache, &alerts, user).await {
                eprintln!("warning: could not drop the cached soul; it expires within the hour");
            }
        }
        Err(e) => eprintln!("warning: {e}; the cached soul expires within the hour"),
    }
}

/// The user's token use against their tier's budget, from Redis or else PostgreSQL (`null`
/// when neither can be read; a tier without a budget shows `null` limits).
async fn token_budget(config: &Config, db: &Db, user: UserId, tier: Tier) -> serde_json::Value {
    let metrics = Metrics::new();
    let Ok(cache) = Cache::new(&config.redis_url, config.namespace.clone(), metrics.clone()) else {
        return serde_json::Value::Null;
    };
    let budgets = Budgets::new(cache, Some(db.clone()), metrics, config);
    match budgets.used(user).await {
        Ok((today, month)) => {
            let limit = config.llm.budget(tier);
            json!({
                "today": today, "month": month,
                "daily_limit": limit.map(|b| b.daily_tokens),
                "monthly_limit": limit.map(|b| b.monthly_tokens),
            })
        }
        Err(_) => serde_json::Value::Null,
    }
}

pub async fn run(config: &Config, cmd: UsersCommand) -> anyhow::Result<()> {
    let db = super::database(config, 2).await?;
    match cmd {
        UsersCommand::Create {
            name,
            tier,
            credits,
            agent,
            workspace,
            json,
        } => {
            anyhow::ensure!(credits >= 0, "--credits must not be negative");
            let agent = match &agent {
                Some(k) => Some(agent_id(&db, &workspace, k).await?),
                None => None,
            };
            let mut client = db.get().await?;
            let tx = client.transaction().await?;
            let mut user = users::create(
                &tx,
                &users::NewUser {
                    workspace: &workspace,
                    display_name: name.as_deref(),
                    tier,
                    credits,
                },
            )
            .await?;
            tx.commit().await?;
            if agent.is_some() {
                users::update(&client, user.id, None, None, Some(agent)).await?;
                user.agent_id = agent;
            }
            if json {
                println!("{}", serde_json::to_string(&user)?);
            } else {
                println!(
                    "created user {} (tier {}, {} credits, referral code {})",
                    user.id,
                    user.tier.as_str(),
                    user.credits,
                    user.referral_code
                );
                println!(
                    "link a channel: hermes channels link {} --platform telegram --sender-id <id>",
                    user.id
                );
            }
        }
        UsersCommand::Show { id, json } => {
            let client = db.get().await?;
            let Some(user) = users::get(&client, id).await? else {
                bail!("no user {id}");
            };
            let channels = users::channels(&client, id).await?;
            let mem = memory::structural(&client, id).await?;
            let facts: i64 = client
                .query_one(
                    "SELECT count(*) FROM user_memory WHERE user_id = $1 AND NOT structural",
                    &[&id],
                )
                .await?
                .get(0);
            let ledger = client
                .query(
                    "SELECT reason, delta, balance_after, run_id, note, created_at
                     FROM credit_ledger WHERE user_id = $1 ORDER BY id DESC LIMIT 10",
                    &[&id],
                )
                .await?;
            let (balance, sum) = credits::audit(&client, id).await?;
            let ledger: Vec<_> = ledger
                .iter()
                .map(|r| {
                    json!({
                        "reason": r.get::<_, String>(0), "delta": r.get::<_, i64>(1),
                        "balance_after": r.get::<_, i64>(2), "run_id": r.get::<_, Option<Uuid>>(3),
                        "note": r.get::<_, Option<String>>(4),
                        "at": r.get::<_, chrono::DateTime<chrono::Utc>>(5),
                    })
                })
                .collect();
            let memory: serde_json::Map<String, serde_json::Value> = mem
                .iter()
                .map(|e| (e.key.clone(), json!(e.value)))
                .collect();
            let tokens = token_budget(config, &db, id, user.tier).await;
            if json {
                println!(
                    "{}",
                    json!({ "user": user, "channels": channels, "memory": memory, "facts": facts,
                            "ledger": ledger, "ledger_balanced": balance == sum,
                            "tokens": tokens })
                );
            } else {
                println!(
                    "user {}  {}",
                    user.id,
                    user.display_name.as_deref().unwrap_or("(no name)")
                );
                println!(
                    "  tier {}  credits {}  referral {}",
                    user.tier.as_str(),
                    user.credits,
                    user.referral_code
                );
                if balance != sum {
                    println!("  WARNING: balance {balance} differs from the ledger sum {sum}");
                }
                for c in &channels {
                    println!(
                        "  channel {} {} {}",
                        c.platform,
                        c.sender_id,
                        if c.activated { "active" } else { "inactive" }
                    );
                }
                for e in &mem {
                    println!("  memory {} = {}", e.key, e.value);
                }
                println!("  {facts} free facts");
                match &tokens {
                    serde_json::Value::Null => println!("  tokens (Redis unreachable)"),
                    t => println!(
                        "  tokens today {} of {}, this month {} of {}",
                        t["today"], t["daily_limit"], t["month"], t["monthly_limit"]
                    ),
                }
                for l in &ledger {
                    println!("  ledger {}", l);
                }
            }
        }
        UsersCommand::Credit {
            id,
            amount,
            note,
            json,
        } => {
            anyhow::ensure!(amount != 0, "the amount must not be 0");
            let mut client = db.get().await?;
            let tx = client.transaction().await?;
            let reason = if amount > 0 {
                credits::Reason::Grant
            } else {
                credits::Reason::Adjust
            };
            let balance = credits::adjust(&tx, id, amount, reason, note.as_deref()).await?;
            tx.commit().await?;
            if json {
                println!("{}", json!({ "user": id, "balance": balance }));
            } else {
                println!("user {id}: balance {balance}");
            }
        }
        UsersCommand::Set {
            id,
            tier,
            name,
            agent,
            workspace,
        } => {
            let agent = match agent.as_deref() {
                None => None,
                Some("none") => Some(None),
                Some(k) => Some(Some(
                    agent_of_users_workspace(&db, id, workspace.as_deref(), k).await?,
                )),
            };
            let client = db.get().await?;
            anyhow::ensure!(
                users::update(&client, id, tier, name.as_deref(), agent).await?,
                "no user {id}"
            );
            invalidate_soul(config, id).await;
            println!("user {id} updated");
        }
        UsersCommand::Erase { id, yes } => {
            erase::run(config, id, yes, &mut std::io::stdout()).await?;
        }
        UsersCommand::Remember { id, key, value } => {
            anyhow::ensure!(!key.trim().is_empty(), "the key must not be empty");
            let mut client = db.get().await?;
            anyhow::ensure!(users::get(&client, id).await?.is_some(), "no user {id}");
            let tx = client.transaction().await?;
            memory::set(&tx, id, key.trim(), value.trim(), memory::Source::Operator).await?;
            tx.commit().await?;
            invalidate_soul(config, id).await;
            println!("user {id}: {} remembered", key.trim());
        }
    }
    Ok(())
}
