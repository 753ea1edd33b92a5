//! `hermes agents`: internal personas answered by the fleet's models, and external agent
//! runtimes woken by signed webhooks (docs/agents.md). An external agent's signing secret is
//! generated here, printed once, and stored sealed with HERMES_SECRET_KEYS; or, with
//! `--workspace-secret`, it has none and its wakes are signed with the workspace's.

use anyhow::{Context, bail};
use clap::Subcommand;
use hermes_config::Config;
use hermes_db::Db;
use hermes_db::agents::{self, Agent, AgentUpdate, NewAgent};
use hermes_db::workspaces;
use hermes_gateway::backends::Backends;
use hermes_gateway::providers::Adapter;
use hermes_net::keyring::KeyRing;
use hermes_types::agent::{AgentKind, AgentStatus, EngagementMode, Tone};
use hermes_types::duration::duration_label;
use hermes_types::model::{BackendOverride, Tier};
use rand::RngCore;
use serde_json::json;

#[derive(Subcommand)]
pub enum AgentsCommand {
    /// Create an agent.
    Create {
        /// The agent's handle: lower-case letters, digits, - and _ (unique per workspace).
        profile_key: String,
        /// internal (answered by the fleet's models) or external (woken by a signed webhook).
        #[arg(long, default_value = "internal")]
        kind: AgentKind,
        /// Name the agent introduces itself with.
        #[arg(long)]
        name: String,
        /// chill, friendly, professional or hype.
        #[arg(long, default_value = "friendly")]
        tone: Tone,
        /// Short role label (e.g. concierge, backend).
        #[arg(long)]
        role: Option<String>,
        /// Role instructions added to the system prompt.
        #[arg(long)]
        instructions: Option<String>,
        /// Tier whose model chain answers for this agent (default: the user's tier).
        #[arg(long)]
        tier: Option<Tier>,
        /// Toolsets this agent may use (comma-separated; default: all the gate allows).
        #[arg(long, value_delimiter = ',')]
        toolsets: Vec<String>,
        /// Capabilities (message intents) it takes in round robin; none = everything.
        #[arg(long, value_delimiter = ',')]
        capabilities: Vec<String>,
        /// External agents: where wakes are POSTed.
        #[arg(long, value_name = "URL", conflicts_with = "pull_only")]
        webhook_url: Option<String>,
        /// External agents: no webhook URL; never woken, it pulls its inbox
        /// (`agent.inbox.list`) and keeps itself present with `agents.heartbeat`.
        #[arg(long, conflicts_with_all = ["standard_webhooks", "workspace_secret"])]
        pull_only: bool,
        /// External agents: wakes also carry Standard Webhooks headers (`webhook-id`,
        /// `webhook-timestamp`, `webhook-signature`).
        #[arg(long)]
        standard_webhooks: bool,
        /// External agents: no secret of its own; wakes are signed with the workspace's
        /// synthetic secret (`hermes workspaces signing-secret`), as the Forge contract allows.
        #[arg(long)]
        workspace_secret: bool,
        /// Runs it may have open at once before round robin skips it.
        #[arg(long, default_value_t = 1)]
        max_concurrent: i32,
        /// EXECUTE, REVIEW, RESEARCH or DISCUSS.
        #[arg(long, default_value = "EXECUTE")]
        mode: EngagementMode,
        /// External agents: how long a run waits for the agent's answer before the user gets
        /// the fallback reply and the credit back (e.g. 90s, 10m, 2h; default 10m).
        #[arg(long, value_name = "DURATION", value_parser = parse_reply_deadline)]
        reply_deadline: Option<i32>,
        /// Internal agents: the tool rounds one of its runs may take (1 to 32; default 4).
        /// Chat messages answered by the built-in persona keep one round.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=32))]
        max_tool_rounds: Option<i32>,
        /// Local-host toolsets or tool names its runs may use (comma-separated; empty: none).
        /// Without it no list applies and the engagement mode alone decides. Enforced by
        /// the tools stage for the runs the fleet answers; an external agent receives it.
        #[arg(long, value_delimiter = ',', value_name = "LIST")]
        tool_allowlist: Option<Vec<String>>,
        #[arg(long, default_value = "default")]
        workspace: String,
        #[arg(long)]
        json: bool,
    },
    /// List agents with their status and open runs.
    List {
        #[arg(long, default_value = "default")]
        workspace: String,
        #[arg(long)]
        json: bool,
    },
    /// Show one agent.
    Show {
        /// The agent's handle.
        profile_key: String,
        #[arg(long, default_value = "default")]
        workspace: String,
        #[arg(long)]
        json: bool,
    },
    /// Probe an external agent's runtime as the Forge contract's dispatcher does:
    /// `GET /v1/models` with its bearer, `GET /v1/runs` expecting 405. Diagnostic only: the
    /// agent is not marked present.
    Probe {
        /// The agent's handle.
        profile_key: String,
        /// The runtime's base URL (default: the origin of the agent's webhook URL).
        #[arg(long, value_name = "URL")]
        base_url: Option<String>,
        /// Read the runtime's bearer token from standard input.
        #[arg(long)]
        token_stdin: bool,
        #[arg(long, default_value = "default")]
        workspace: String,
    },
    /// Change an agent; takes effect on the next message, no restart.
    Set {
        /// The agent's handle.
        profile_key: String,
        /// Name the agent introduces itself with.
        #[arg(long)]
        name: Option<String>,
        /// chill, friendly, professional or hype.
        #[arg(long)]
        tone: Option<Tone>,
        /// Role instructions added to the system prompt.
        #[arg(long)]
        instructions: Option<String>,
        /// Tier whose model chain answers for this agent.
        #[arg(long)]
        tier: Option<Tier>,
        /// Toolsets this agent may use (comma-separated; replaces the list).
        #[arg(long, value_delimiter = ',')]
        toolsets: Option<Vec<String>>,
        /// Capabilities it takes in round robin (comma-separated; replaces the list).
        #[arg(long, value_delimiter = ',')]
        capabilities: Option<Vec<String>>,
        /// External agents: where wakes are POSTed.
        #[arg(long, value_name = "URL")]
        webhook_url: Option<String>,
        /// External agents: also send Standard Webhooks headers (true or false).
        #[arg(long, value_name = "BOOL")]
        standard_webhooks: Option<bool>,
        /// Runs it may have open at once.
        #[arg(long)]
        max_concurrent: Option<i32>,
        /// ONLINE, BUSY or OFFLINE (BUSY and OFFLINE agents are skipped by round robin).
        #[arg(long)]
        status: Option<AgentStatus>,
        /// EXECUTE, REVIEW, RESEARCH or DISCUSS.
        #[arg(long)]
        mode: Option<EngagementMode>,
        /// External agents: how long a run waits for the agent's answer (e.g. 90s, 10m, 2h);
        /// applies to runs dispatched from now on.
        #[arg(long, value_name = "DURATION", value_parser = parse_reply_deadline)]
        reply_deadline: Option<i32>,
        /// Internal agents: the tool rounds one of its runs may take (1 to 32).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=32))]
        max_tool_rounds: Option<i32>,
        /// Local-host toolsets or tool names its runs may use (comma-separated; replaces the
        /// list; empty: none).
        #[arg(
            long,
            value_delimiter = ',',
            value_name = "LIST",
            conflicts_with = "clear_tool_allowlist"
        )]
        tool_allowlist: Option<Vec<String>>,
        /// Remove the tool allowlist: the engagement mode alone decides.
        #[arg(long)]
        clear_tool_allowlist: bool,
        /// Move the agent to this backend at run time (mock, hermes, openrouter, anthropic,
        /// gemini, openai, ollama or an OpenAI-compatible preset), or to `provider:model`,
        /// tried before its tier's chain; `none` returns it to the chain. The switch lands
        /// only if the backend passes a health check with the workspace's keys; otherwise it
        /// is rolled back and the agent stays where it was.
        #[arg(long, value_name = "BACKEND")]
        backend: Option<String>,
        /// Model id on --backend (default: the backend's own default model), or
        /// `provider:model` alone (e.g. `anthropic:claude-sonnet-4-5`).
        #[arg(long)]
        model: Option<String>,
        #[arg(long, default_value = "default")]
        workspace: String,
    },
}

/// The longest reply deadline accepted: a week (a run waits no longer for its answer).
const MAX_REPLY_DEADLINE_SECS: u64 = 7 * 24 * 3600;

/// A new webhook signing secret (`whsec_` and 32 random bytes in hex): an agent's own, or a
/// workspace's synthetic one.
pub(super) fn new_signing_secret() -> String {
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    format!("whsec_{}", hex::encode(raw))
}

/// `--reply-deadline`: a duration from a second to a week, in whole seconds.
fn parse_reply_deadline(text: &str) -> Result<i32, String> {
    let d = hermes_types::duration::parse_duration(text)?;
    if d.as_secs() > MAX_REPLY_DEADLINE_SECS {
        return Err(format!("{text:?} is longer than the most allowed, 7 days"));
    }
    i32::try_from(d.as_secs()).map_err(|e| e.to_string())
}

fn check_url(url: &str) -> anyhow::Result<()> {
    let u = url::Url::parse(url).context("--webhook-url is not a URL")?;
    anyhow::ensure!(
        matches!(u.scheme(), "http" | "https"),
        "--webhook-url must be http or https"
    );
    Ok(())
}

/// An allowlist as typed: names trimmed, empty entries dropped (`--tool-allowlist ""` is
/// the empty list: no local-host tool at all).
fn allowlist(list: Option<Vec<String>>) -> Option<Vec<String>> {
    list.map(|l| {
        l.into_iter()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect()
    })
}

fn print_agent(a: &Agent, open: Option<i64>) {
    // An external agent's reply deadline is part of its line; internal agents have none.
    let deadline = match a.kind {
        AgentKind::External => format!("  deadline {}", duration_label(a.reply_deadline())),
        AgentKind::Internal => String::new(),
    };
    println!(
        "{:<16} {:<8} {:<8} {:<9} open {}/{}{deadline}  {}",
        a.profile_key,
        a.kind.as_str(),
        a.status.as_str(),
        a.engagement_mode.as_str(),
        open.map(|o| o.to_string()).unwrap_or_else(|| "?".into()),
        a.max_concurrent,
        a.display_name
    );
}

/// Move `agent` to `backend` (`none`: back to the chain) after a health check of the new
/// backend with its workspace's keys. The write happens in a transaction that is rolled
/// back when the check fails, so the router never sees an unhealthy switch.
async fn switch_backend(
    config: &Config,
    db: &Db,
    agent: &Agent,
    target: Option<BackendOverride>,
) -> anyhow::Result<()> {
    let mut client = db.get().await?;
    let tx = client.transaction().await?;
    let previous = agents::set_backend(&tx, agent.id, target.as_ref()).await?;
    let describe = |o: &Option<BackendOverride>| match o {
        Some(o) => format!("{} ({})", o.backend, o.model),
        None => "the tier's chain".to_string(),
    };
    if let Some(t) = &target {
        let keys = KeyRing::new(&config.router.secret_keys);
        let secrets =
            workspaces::provider_secrets(&tx, Some(agent.workspace_id), keys.as_ref()).await?;
        let backends = Backends::new(std::sync::Arc::new(config.clone()), None)?;
        let checked = match backends.pinned(t.backend, Some(&secrets)) {
            Ok(b) => b.health_check().await.map_err(|e| e.to_string()),
            Err(why) => Err(why),
        };
        if let Err(why) = checked {
            tx.rollback().await?;
            bail!(
                "health check of {} failed ({why}); rolled back: the agent stays on {}",
                t.backend,
                describe(&previous)
            );
        }
    }
    tx.commit().await?;
    println!(
        "agent {}: backend {} → {}",
        agent.profile_key,
        describe(&previous),
        describe(&target)
    );
    Ok(())
}

pub async fn run(config: &Config, cmd: AgentsCommand) -> anyhow::Result<()> {
    // Two: `set --backend` writes in its own transaction while the lookup holds one.
    let db = super::database(config, 2).await?;
    let client = db.get().await?;
    match cmd {
        AgentsCommand::Create {
            profile_key,
            kind,
            name,
            tone,
            role,
            instructions,
            tier,
            toolsets,
            capabilities,
            webhook_url,
            pull_only,
            standard_webhooks,
            workspace_secret,
            max_concurrent,
            mode,
            reply_deadline,
            max_tool_rounds,
            tool_allowlist,
            workspace,
            json,
        } => {
            anyhow::ensure!(
                !pull_only || kind == AgentKind::External,
                "--pull-only is for external agents"
            );
            anyhow::ensure!(
                !standard_webhooks || kind == AgentKind::External,
                "--standard-webhooks is for external agents"
            );
            anyhow::ensure!(
                reply_deadline.is_none() || kind == AgentKind::External,
                "--reply-deadline is for external agents (the fleet answers internal ones)"
            );
            anyhow::ensure!(
                max_tool_rounds.is_none() || kind == AgentKind::Internal,
                "--max-tool-rounds is for internal agents (an external agent runs its own tools)"
            );
            anyhow::ensure!(max_concurrent > 0, "--max-concurrent must be above 0");
            anyhow::ensure!(!name.trim().is_empty(), "--name must not be empty");
            let key_ok = !profile_key.is_empty()
                && profile_key.len() <= 63
                && profile_key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
            anyhow::ensure!(
                key_ok,
                "the profile key must be lower-case letters, digits, - and _ (at most 63)"
            );
            let (sealed, secret) = match kind {
                AgentKind::Internal => {
                    anyhow::ensure!(
                        webhook_url.is_none(),
                        "--webhook-url is for external agents"
                    );
                    (None, None)
                }
                // Never woken: nothing to sign.
                AgentKind::External if pull_only => (None, None),
                AgentKind::External => {
                    let url = webhook_url
                        .as_deref()
                        .context("an external agent needs --webhook-url (or --pull-only)")?;
                    check_url(url)?;
                    if workspace_secret {
                        let id = workspaces::id_by_slug(&client, &workspace)
                            .await?
                            .with_context(|| format!("no workspace {workspace:?}"))?;
                        anyhow::ensure!(
                            workspaces::has_signing_secret(&client, id).await?,
                            "workspace {workspace:?} has no signing secret: make one with `hermes workspaces signing-secret --workspace {workspace}`"
                        );
                        (None, None)
                    } else {
                        let ring = KeyRing::new(&config.router.secret_keys).context(
                            "HERMES_SECRET_KEYS is not set: it encrypts webhook secrets at rest",
                        )?;
                        let secret = new_signing_secret();
                        (Some(ring.seal(secret.as_bytes())), Some(secret))
                    }
                }
            };
            anyhow::ensure!(
                !workspace_secret || kind == AgentKind::External,
                "--workspace-secret is for external agents"
            );
            let agent = agents::create(
                &client,
                &NewAgent {
                    workspace: &workspace,
                    profile_key: &profile_key,
                    kind,
                    display_name: name.trim(),
                    tone,
                    role: role.as_deref(),
                    role_instructions: instructions.as_deref(),
                    tier,
                    toolsets: &toolsets,
                    capabilities: &capabilities,
                    webhook_url: webhook_url.as_deref(),
                    webhook_secret_sealed: sealed.as_deref(),
                    max_concurrent,
                    engagement_mode: mode,
                },
            )
            .await?;
            let tool_allowlist = allowlist(tool_allowlist);
            let agent = if standard_webhooks
                || tool_allowlist.is_some()
                || reply_deadline.is_some()
                || max_tool_rounds.is_some()
            {
                let on = AgentUpdate {
                    standard_webhooks: standard_webhooks.then_some(true),
                    tool_allowlist: tool_allowlist.as_deref().map(Some),
                    reply_deadline_secs: reply_deadline,
                    max_tool_rounds,
                    ..AgentUpdate::default()
                };
                agents::update(&client, agent.id, &on).await?;
                agents::get(&client, agent.id)
                    .await?
                    .context("the agent just created is gone")?
            } else {
                agent
            };
            if json {
                println!("{}", json!({ "agent": agent, "webhook_secret": secret }));
            } else {
                println!("created agent {} ({})", agent.profile_key, agent.id);
                if let Some(s) = secret {
                    println!("webhook signing secret: {s}");
                    println!("(shown once: give it to the agent runtime to verify wakes)");
                }
            }
        }
        AgentsCommand::List { workspace, json } => {
            let all = agents::list(&client, &workspace).await?;
            if json {
                let rows: Vec<_> = all
                    .iter()
                    .map(|(a, open)| json!({ "agent": a, "open_runs": open }))
                    .collect();
                println!("{}", serde_json::Value::from(rows));
            } else if all.is_empty() {
                println!("no agents in workspace {workspace:?}: the configured persona answers");
            } else {
                for (a, open) in &all {
                    print_agent(a, Some(*open));
                }
            }
        }
        AgentsCommand::Show {
            profile_key,
            workspace,
            json,
        } => {
            let Some(a) = agents::by_key(&client, &workspace, &profile_key).await? else {
                bail!("no agent {profile_key:?} in workspace {workspace:?}");
            };
            if json {
                println!("{}", serde_json::to_string(&a)?);
            } else {
                print_agent(&a, None);
                println!(
                    "  id {}  tone {}  tier {}",
                    a.id,
                    a.tone,
                    a.tier.map(Tier::as_str).unwrap_or("(user's)")
                );
                println!(
                    "  toolsets {:?}  capabilities {:?}",
                    a.toolsets, a.capabilities
                );
                if a.kind == AgentKind::Internal {
                    println!("  max tool rounds {}", a.max_tool_rounds);
                }
                match &a.tool_allowlist {
                    Some(list) => println!("  tool allowlist {list:?}"),
                    None => println!("  tool allowlist (none: the mode alone decides)"),
                }
                match (&a.webhook_url, a.kind) {
                    (Some(u), _) => println!("  webhook {u}"),
                    (None, AgentKind::External) => {
                        println!("  pull-only (no webhook: never woken)")
                    }
                    (None, AgentKind::Internal) => {}
                }
                if let Some(t) = a.last_heartbeat_at {
                    println!("  last heartbeat {t}");
                }
                if a.kind == AgentKind::External {
                    println!(
                        "  reply deadline {} ({} s)",
                        duration_label(a.reply_deadline()),
                        a.reply_deadline_secs
                    );
                }
                match &a.backend {
                    Some(o) => println!(
                        "  backend {} model {} (then the tier's chain)",
                        o.backend, o.model
                    ),
                    None => println!("  backend (the tier's chain)"),
                }
            }
        }
        AgentsCommand::Probe {
            profile_key,
            base_url,
            token_stdin,
            workspace,
        } => {
            let Some(a) = agents::by_key(&client, &workspace, &profile_key).await? else {
                bail!("no agent {profile_key:?} in workspace {workspace:?}");
            };
            super::agents_probe::probe(&a, base_url.as_deref(), token_stdin).await?;
        }
        AgentsCommand::Set {
            profile_key,
            name,
            tone,
            instructions,
            tier,
            toolsets,
            capabilities,
            webhook_url,
            standard_webhooks,
            max_concurrent,
            status,
            mode,
            reply_deadline,
            max_tool_rounds,
            tool_allowlist,
            clear_tool_allowlist,
            backend,
            model,
            workspace,
        } => {
            if let Some(u) = &webhook_url {
                check_url(u)?;
            }
            if let Some(m) = max_concurrent {
                anyhow::ensure!(m > 0, "--max-concurrent must be above 0");
            }
            // Parsed before anything is written: a bad name changes nothing.
            let target = super::agents_backend::target(backend.as_deref(), model.as_deref())?;
            let Some(a) = agents::by_key(&client, &workspace, &profile_key).await? else {
                bail!("no agent {profile_key:?} in workspace {workspace:?}");
            };
            anyhow::ensure!(
                reply_deadline.is_none() || a.kind == AgentKind::External,
                "--reply-deadline is for external agents (the fleet answers internal ones)"
            );
            let tool_allowlist = allowlist(tool_allowlist);
            let update = AgentUpdate {
                display_name: name.as_deref(),
                tone,
                role_instructions: instructions.as_deref(),
                tier,
                toolsets: toolsets.as_deref(),
                capabilities: capabilities.as_deref(),
                webhook_url: webhook_url.as_deref(),
                max_concurrent,
                status,
                engagement_mode: mode,
                standard_webhooks,
                tool_allowlist: if clear_tool_allowlist {
                    Some(None)
                } else {
                    tool_allowlist.as_deref().map(Some)
                },
                reply_deadline_secs: reply_deadline,
                max_tool_rounds,
            };
            agents::update(&client, a.id, &update).await?;
            if let Some(t) = target {
                switch_backend(config, &db, &a, t).await?;
            }
            println!("agent {profile_key} updated");
        }
    }
    Ok(())
}
