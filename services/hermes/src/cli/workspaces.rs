//! `hermes workspaces secret …`: workspace-level provider keys that override the global ones
//! for the workspace's agents (docs/models-and-budgets.md, "Choosing the provider"); and
//! `hermes workspaces signing-secret`: the workspace's synthetic secret, which signs the
//! wakes of its agents that have none of their own (docs/agents.md, "Signed agent webhooks").

use std::io::Read;

use anyhow::{Context, bail};
use clap::Subcommand;
use hermes_config::{BackendKind, Config};
use hermes_db::workspaces;
use hermes_net::keyring::KeyRing;

#[derive(Subcommand)]
pub enum WorkspacesCommand {
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
    let cmd = match cmd {
        WorkspacesCommand::Secret(cmd) => cmd,
        WorkspacesCommand::SigningSecret { workspace, rotate } => {
            let id = workspaces::id_by_slug(&client, &workspace)
                .await?
                .with_context(|| format!("no workspace {workspace:?}"))?;
            let keys = KeyRing::new(&config.router.secret_keys)
                .context("HERMES_SECRET_KEYS is not set: it encrypts signing secrets at rest")?;
            let secret = super::agents::new_signing_secret();
            let sealed = keys.seal(secret.as_bytes());
            if !workspaces::set_signing_secret(&client, id, &sealed, rotate).await? {
                bail!(
                    "workspace {workspace:?} has a signing secret already (--rotate replaces it)"
                );
            }
            println!("workspace {workspace} signing secret: {secret}");
            println!("(shown once: give it to the agent runtimes that verify its wakes)");
            return Ok(());
        }
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
