//! `hermes channels link`: a platform sender linked to a user, so its messages are answered
//! (docs/agents.md, "Users and their channels").

use anyhow::bail;
use clap::Subcommand;
use hermes_config::Config;
use hermes_db::users;
use hermes_types::ids::UserId;
use hermes_types::model::Platform;
use serde_json::json;

use super::users::agent_of_users_workspace;

#[derive(Subcommand)]
pub enum ChannelsCommand {
    /// Link a platform sender to a user so its messages are answered.
    Link {
        /// The user's id.
        user: UserId,
        /// telegram, whatsapp, instagram, slack or rest.
        #[arg(long)]
        platform: String,
        /// The sender id on that platform (Telegram user id, WhatsApp number, IG-scoped id, Slack
        /// member id `U…`, REST sender_id).
        #[arg(long)]
        sender_id: String,
        /// Link without activating (messages get the signup prompt until activated).
        #[arg(long)]
        inactive: bool,
        /// Assign this channel to an agent (profile key) of the user's own workspace; wins
        /// over the user's agent.
        #[arg(long, value_name = "PROFILE_KEY")]
        agent: Option<String>,
        /// For `--platform rest`: the API key (its id) whose callers post as this sender.
        /// Without it only the operator key (`API_SERVER_KEY`) reaches the sender.
        #[arg(long, value_name = "KEY_ID")]
        api_key: Option<hermes_types::ids::ApiKeyId>,
        /// The user's workspace (slug), checked when given.
        #[arg(long, value_name = "SLUG")]
        workspace: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run_channels(config: &Config, cmd: ChannelsCommand) -> anyhow::Result<()> {
    let db = super::database(config, 2).await?;
    match cmd {
        ChannelsCommand::Link {
            user,
            platform,
            sender_id,
            inactive,
            agent,
            api_key,
            workspace,
            json,
        } => {
            let platform = match Platform::parse(&platform) {
                // API callers and Forge wakes have no sender to link.
                Some(p) if !matches!(p, Platform::Api | Platform::Forge) => p,
                _ => {
                    let linkable: Vec<&str> = Platform::ALL
                        .into_iter()
                        .filter(|p| !matches!(p, Platform::Api | Platform::Forge))
                        .map(Platform::as_str)
                        .collect();
                    bail!("--platform must be one of {}", linkable.join(", "))
                }
            };
            anyhow::ensure!(
                api_key.is_none() || platform == Platform::Rest,
                "--api-key is for --platform rest"
            );
            anyhow::ensure!(
                !sender_id.trim().is_empty(),
                "--sender-id must not be empty"
            );
            let client = db.get().await?;
            anyhow::ensure!(users::get(&client, user).await?.is_some(), "no user {user}");
            let agent = match &agent {
                Some(k) => {
                    Some(agent_of_users_workspace(&db, user, workspace.as_deref(), k).await?)
                }
                None => None,
            };
            if let Some(key) = api_key {
                anyhow::ensure!(
                    hermes_db::api_keys::get(&client, key).await?.is_some(),
                    "no API key {key}"
                );
            }
            let scope = users::ChannelScope { platform, api_key };
            let linked =
                users::link_channel(&client, user, scope, sender_id.trim(), !inactive, agent)
                    .await?;
            anyhow::ensure!(
                linked,
                "{} sender {sender_id} is linked to another user; unlink it there first",
                platform.as_str()
            );
            if json {
                println!(
                    "{}",
                    json!({ "user": user, "platform": platform.as_str(), "sender_id": sender_id.trim(),
                            "api_key_id": api_key, "activated": !inactive })
                );
            } else {
                println!(
                    "linked {} sender {} to user {user}{}",
                    platform.as_str(),
                    sender_id.trim(),
                    if inactive { " (inactive)" } else { "" }
                );
                if platform == Platform::Rest && api_key.is_none() {
                    println!(
                        "(no --api-key: only API_SERVER_KEY posts as this sender; an API key's \
                         callers need it linked under their key)"
                    );
                }
            }
        }
    }
    Ok(())
}
