//! `hermes workspaces create|list|show|set`: workspaces with their slug, contract key,
//! synthetic signing secret and the daily budget of their Forge runs (docs/agents.md,
//! "Workspaces"); `hermes workspaces secret …`: workspace-level provider keys that override
//! the global ones for the workspace's agents (docs/models-and-budgets.md, "Choosing the
//! provider"); and `hermes workspaces signing-secret`: the workspace's synthetic secret, which
//! signs the wakes of its agents that have none of their own (docs/agents.md, "Signed agent
//! webhooks").

use std::io::Read;

use anyhow::{Context, bail};
use clap::Subcommand;
use hermes_config::{BackendKind, Config};
use hermes_db::workspaces;
use hermes_net::keyring::KeyRing;
use serde_json::json;

#[derive(Subcommand)]
pub enum WorkspacesCommand {
    /// Create a workspace: its agents, users and keys are apart from every other's (the same
    /// profile key may be used in each).
    Create {
        /// Lower-case letters, digits, - and _, starting with a letter (at most 40).
        slug: String,
        /// A name for people.
        #[arg(long)]
        name: String,
        #[command(flatten)]
        fields: WorkspaceFields,
        /// Make its synthetic webhook signing secret now (printed once).
        #[arg(long)]
        signing_secret: bool,
        #[arg(long)]
        json: bool,
    },
    /// List the workspaces.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Show one workspace (never its secrets).
    Show {
        slug: String,
        #[arg(long)]
        json: bool,
    },
    /// Change a workspace; applies to the next wake and the next model call.
    Set {
        slug: String,
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        fields: WorkspaceFields,
    },
    /// Workspace-level provider keys: a value overrides the global key of the same name
    /// for the workspace's agents; a cleared key hides the global one (e.g. clear
    /// ANTHROPIC_API_KEY to force Gemini dispatch). Applies within 30 s, no restart.
    #[command(subcommand)]
    Secret(SecretCommand),
    /// Make the workspace's synthetic webhook signing secret (printed once, stored sealed
    /// with HERMES_SECRET_KEYS): wakes of its agents made with `--workspace-secret` are
    /// signed with it.
    SigningSecret {
        #[arg(long, default_value = "default")]
        workspace: String,
        /// Replace an existing one (wakes are signed with the new one at once).
        #[arg(long)]
        rotate: bool,
    },
}

/// What `create` and `set` may give a workspace.
#[derive(clap::Args)]
pub struct WorkspaceFields {
    /// The contract's `workspace.key` and the prefix of issue keys: an upper-case letter,
    /// then up to nine upper-case letters or digits (default: derived from the slug;
    /// `derived` on `set` returns to it).
    #[arg(long)]
    key: Option<String>,
    /// Tokens its Forge runs may use per UTC day (0: no limit; `default`: the install's
    /// HERMES_FORGE_DAILY_TOKENS).
    #[arg(long, value_name = "N|default")]
    daily_tokens: Option<String>,
    /// Dollars its Forge runs may spend per UTC day (0: no limit; `default`: the install's
    /// HERMES_FORGE_DAILY_USD).
    #[arg(long, value_name = "USD|default")]
    daily_usd: Option<String>,
    /// Whether its runs may start runs in other workspaces with `delegate_task_async`
    /// (docs/a2a.md, "Delegating to other workspaces"; default false).
    #[arg(long, value_name = "true|false")]
    orchestrator: Option<bool>,
}

/// A workspace's own limit as typed: `Some(None)` for `default` (the install's), else the
/// amount.
fn own_limit(
    flag: &str,
    value: Option<&str>,
    parse: impl Fn(&str) -> anyhow::Result<i64>,
) -> anyhow::Result<Option<Option<i64>>> {
    match value.map(str::trim) {
        None => Ok(None),
        Some("default") => Ok(Some(None)),
        Some(v) => Ok(Some(Some(
            parse(v).with_context(|| format!("{flag} {v:?}"))?,
        ))),
    }
}

impl WorkspaceFields {
    /// The key given: `Some(None)` for `derived`.
    fn key(&self) -> anyhow::Result<Option<Option<&str>>> {
        match self.key.as_deref() {
            None => Ok(None),
            Some("derived") => Ok(Some(None)),
            Some(k) if workspaces::valid_key(k) => Ok(Some(Some(k))),
            Some(k) => bail!(
                "--key {k:?} must be an upper-case letter, then up to nine upper-case letters or digits"
            ),
        }
    }

    fn daily_tokens(&self) -> anyhow::Result<Option<Option<i64>>> {
        own_limit("--daily-tokens", self.daily_tokens.as_deref(), |v| {
            Ok(v.parse::<u32>()?.into())
        })
    }

    fn daily_micro_usd(&self) -> anyhow::Result<Option<Option<i64>>> {
        own_limit("--daily-usd", self.daily_usd.as_deref(), |v| {
            let micro = hermes_config::Price::parse(v)
                .map_err(anyhow::Error::msg)?
                .0;
            Ok(i64::try_from(micro)?)
        })
    }
}

/// A limit as shown: the workspace's own, or the install's.
fn limit_label(own: Option<i64>, unit: impl Fn(i64) -> String) -> String {
    match own {
        None => "the install's".into(),
        Some(0) => "no limit".into(),
        Some(n) => unit(n),
    }
}

fn print_workspace(w: &workspaces::Workspace) {
    println!(
        "{:<16} key {:<10}{} agents {:<3} signing secret {}{}  {}",
        w.slug,
        w.key,
        if w.key_set { "" } else { " (derived)" },
        w.agents,
        if w.signing_secret { "yes" } else { "no" },
        if w.orchestrator { "  orchestrator" } else { "" },
        w.name
    );
    println!(
        "  Forge runs per day: tokens {}, dollars {}",
        limit_label(w.daily_tokens, |n| n.to_string()),
        limit_label(w.daily_micro_usd, |m| format!(
            "{}.{:06}",
            m / 1_000_000,
            m % 1_000_000
        ))
    );
}

/// A new signing secret: (sealed, plain).
fn new_signing_secret(config: &Config) -> anyhow::Result<(String, String)> {
    let keys = KeyRing::new(&config.router.secret_keys)
        .context("HERMES_SECRET_KEYS is not set: it encrypts signing secrets at rest")?;
    let secret = super::agents::new_signing_secret();
    Ok((keys.seal(secret.as_bytes()), secret))
}

/// Every command but `secret`, whose own command is returned.
async fn manage(
    config: &Config,
    client: &hermes_db::Client,
    cmd: WorkspacesCommand,
) -> anyhow::Result<Option<SecretCommand>> {
    match cmd {
        WorkspacesCommand::Create {
            slug,
            name,
            fields,
            signing_secret,
            json,
        } => {
            anyhow::ensure!(
                workspaces::valid_slug(&slug),
                "the slug must be lower-case letters, digits, - and _, starting with a letter (at most 40)"
            );
            anyhow::ensure!(!name.trim().is_empty(), "--name must not be empty");
            let secret = signing_secret
                .then(|| new_signing_secret(config))
                .transpose()?;
            let w = workspaces::create(
                client,
                &workspaces::NewWorkspace {
                    slug: &slug,
                    name: name.trim(),
                    key: fields.key()?.flatten(),
                    signing_secret_sealed: secret.as_ref().map(|(sealed, _)| sealed.as_str()),
                    daily_tokens: fields.daily_tokens()?.flatten(),
                    daily_micro_usd: fields.daily_micro_usd()?.flatten(),
                    orchestrator: fields.orchestrator.unwrap_or(false),
                },
            )
            .await?;
            let plain = secret.map(|(_, plain)| plain);
            if json {
                println!("{}", json!({ "workspace": w, "signing_secret": plain }));
            } else {
                println!("created workspace {} ({}) key {}", w.slug, w.id, w.key);
                if let Some(s) = plain {
                    println!("workspace {} signing secret: {s}", w.slug);
                    println!("(shown once: give it to the agent runtimes that verify its wakes)");
                }
            }
        }
        WorkspacesCommand::List { json } => {
            let all = workspaces::list(client).await?;
            if json {
                println!("{}", serde_json::to_string(&all)?);
            } else {
                all.iter().for_each(print_workspace);
            }
        }
        WorkspacesCommand::Show { slug, json } => {
            let w = workspaces::by_slug(client, &slug)
                .await?
                .with_context(|| format!("no workspace {slug:?}"))?;
            if json {
                println!("{}", serde_json::to_string(&w)?);
            } else {
                print_workspace(&w);
                println!("  id {}  created {}", w.id, w.created_at);
            }
        }
        WorkspacesCommand::Set { slug, name, fields } => {
            let id = workspaces::id_by_slug(client, &slug)
                .await?
                .with_context(|| format!("no workspace {slug:?}"))?;
            if let Some(n) = &name {
                anyhow::ensure!(!n.trim().is_empty(), "--name must not be empty");
            }
            let update = workspaces::WorkspaceUpdate {
                name: name.as_deref().map(str::trim),
                key: fields.key()?,
                daily_tokens: fields.daily_tokens()?,
                daily_micro_usd: fields.daily_micro_usd()?,
                orchestrator: fields.orchestrator,
            };
            workspaces::update(client, id, &update).await?;
            println!("workspace {slug} updated");
        }
        WorkspacesCommand::SigningSecret { workspace, rotate } => {
            let id = workspaces::id_by_slug(client, &workspace)
                .await?
                .with_context(|| format!("no workspace {workspace:?}"))?;
            let (sealed, secret) = new_signing_secret(config)?;
            if !workspaces::set_signing_secret(client, id, &sealed, rotate).await? {
                bail!(
                    "workspace {workspace:?} has a signing secret already (--rotate replaces it)"
                );
            }
            println!("workspace {workspace} signing secret: {secret}");
            println!("(shown once: give it to the agent runtimes that verify its wakes)");
        }
        WorkspacesCommand::Secret(cmd) => return Ok(Some(cmd)),
    }
    Ok(None)
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
    let db = super::database(config, 1).await?;
    let client = db.get().await?;
    let Some(cmd) = manage(config, &client, cmd).await? else {
        return Ok(());
    };
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
