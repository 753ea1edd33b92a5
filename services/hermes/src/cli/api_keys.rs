//! `hermes api-keys`: keys of the REST channel. The key is printed once at creation; only
//! its hash is stored. So is the key's callback signing secret (Standard Webhooks), which
//! is stored sealed with HERMES_SECRET_KEYS and can be rotated. A key made with `--agent` is
//! that agent's identity on the agent MCP surface (docs/agents.md, "The agent's side").

use clap::Subcommand;
use hermes_config::Config;
use hermes_db::api_keys::{KeyLimits, KeyScope};
use hermes_db::{agents, api_keys};
use hermes_net::keyring::KeyRing;
use serde_json::json;

/// A key's scopes, request rate and budgets, as flags of `create` and `set`.
#[derive(clap::Args, Default)]
pub struct AccessArgs {
    /// A surface the key may call: `messages` (the REST channel), `chat` (the
    /// OpenAI-compatible API), `jobs` (scheduled jobs), `operator` (the operator MCP server
    /// at `/mcp`, the console, workspaces: every conversation, sending, approvals; never a
    /// default) or `a2a` (the workspaces' A2A routes); repeat for several. A new key gets
    /// `messages` by default.
    #[arg(long = "scope", value_name = "SCOPE")]
    scopes: Vec<KeyScope>,
    /// Requests per minute on either surface (0: no limit).
    #[arg(long, value_name = "N")]
    requests_per_minute: Option<u32>,
    /// Tokens per UTC day over every model call made for the key (0: no limit).
    #[arg(long, value_name = "N")]
    daily_tokens: Option<u64>,
    /// Tokens per UTC month (0: no limit).
    #[arg(long, value_name = "N")]
    monthly_tokens: Option<u64>,
    /// Dollars per UTC day, e.g. 2.50 (0: no limit).
    #[arg(long, value_name = "USD")]
    daily_usd: Option<String>,
    /// Dollars per UTC month (0: no limit).
    #[arg(long, value_name = "USD")]
    monthly_usd: Option<String>,
    /// Local-host toolsets (e.g. `mcp-shell`) or tools the key's API and job runs may be
    /// offered, comma-separated; replaces what the key had (`""`: none). A key has none
    /// until granted: its runs get only the tools that act off the host.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    toolsets: Option<Vec<String>>,
}

/// `Some(n)` for a limit, `None` for 0 (no limit).
fn limit<T: PartialEq + Default>(n: T) -> Option<T> {
    (n != T::default()).then_some(n)
}

fn dollars(flag: &str, value: &str) -> anyhow::Result<Option<u64>> {
    let micro = hermes_config::Price::parse(value)
        .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?
        .0;
    Ok(limit(micro))
}

impl AccessArgs {
    /// `limits` with every flag given applied.
    fn apply(&self, mut l: KeyLimits) -> anyhow::Result<KeyLimits> {
        if let Some(n) = self.requests_per_minute {
            l.requests_per_minute = limit(n);
        }
        if let Some(n) = self.daily_tokens {
            l.daily_tokens = limit(n);
        }
        if let Some(n) = self.monthly_tokens {
            l.monthly_tokens = limit(n);
        }
        if let Some(v) = &self.daily_usd {
            l.daily_micro_usd = dollars("--daily-usd", v)?;
        }
        if let Some(v) = &self.monthly_usd {
            l.monthly_micro_usd = dollars("--monthly-usd", v)?;
        }
        Ok(l)
    }

    /// Write what was given to key `id`.
    async fn save(&self, client: &hermes_db::Client, key: &api_keys::ApiKey) -> anyhow::Result<()> {
        if !self.scopes.is_empty() {
            api_keys::set_scopes(client, key.id, &self.scopes).await?;
        }
        let limits = self.apply(key.limits)?;
        if limits != key.limits {
            api_keys::set_limits(client, key.id, &limits).await?;
        }
        if let Some(list) = &self.toolsets {
            // Names trimmed, empty entries dropped: `--toolsets ""` grants none.
            let list: Vec<String> = list
                .iter()
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect();
            api_keys::set_toolsets(client, key.id, &list).await?;
        }
        Ok(())
    }
}

/// One line of a key's scopes and limits.
fn describe(k: &api_keys::ApiKey) -> String {
    let scopes: Vec<&str> = k.scopes.iter().map(|s| s.as_str()).collect();
    let usd = |m: Option<u64>| m.map(|m| format!("${}.{:06}", m / 1_000_000, m % 1_000_000));
    let l = &k.limits;
    let mut parts = vec![format!("scopes {}", scopes.join(","))];
    if !k.toolsets.is_empty() {
        parts.push(format!("host toolsets {}", k.toolsets.join(",")));
    }
    for (name, value) in [
        ("rpm", l.requests_per_minute.map(|n| n.to_string())),
        ("tokens/day", l.daily_tokens.map(|n| n.to_string())),
        ("tokens/month", l.monthly_tokens.map(|n| n.to_string())),
        ("usd/day", usd(l.daily_micro_usd)),
        ("usd/month", usd(l.monthly_micro_usd)),
    ] {
        if let Some(v) = value {
            parts.push(format!("{name} {v}"));
        }
    }
    parts.join(", ")
}

/// The agent a key speaks for, as JSON (`null`: none).
fn agent_json(agent: Option<&agents::Agent>) -> serde_json::Value {
    agent.map_or(
        serde_json::Value::Null,
        |a| json!({ "id": a.id, "profileKey": a.profile_key }),
    )
}

#[derive(Subcommand)]
pub enum KeysCommand {
    /// Create a key (printed once: store it now).
    Create {
        /// A name to recognize the key by (who uses it).
        #[arg(long)]
        name: String,
        /// Where answers to this key's messages are POSTed (else they are polled).
        #[arg(long, value_name = "URL")]
        callback_url: Option<String>,
        /// The profile key of the agent this key speaks for on the agent MCP surface
        /// (`/api/mcp`): calls made with the key act as that agent.
        #[arg(long, value_name = "PROFILE_KEY")]
        agent: Option<String>,
        /// The workspace (slug) of `--agent`.
        #[arg(
            long,
            value_name = "SLUG",
            default_value = "default",
            requires = "agent"
        )]
        workspace: String,
        #[command(flatten)]
        access: AccessArgs,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Change a key's scopes (replaced when given), request rate or budgets (0 clears one);
    /// applies within 30 seconds.
    Set {
        id: hermes_types::ids::ApiKeyId,
        #[command(flatten)]
        access: AccessArgs,
    },
    /// List keys (never the keys themselves).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke a key by id; it stops working within 30 seconds.
    Revoke { id: hermes_types::ids::ApiKeyId },
    /// Give a key a new callback signing secret (printed once); the old one stops signing
    /// within 30 seconds.
    RotateSecret {
        id: hermes_types::ids::ApiKeyId,
        #[arg(long)]
        json: bool,
    },
}

fn check_callback(url: &str) -> anyhow::Result<()> {
    let parsed =
        url::Url::parse(url).map_err(|e| anyhow::anyhow!("--callback-url is not a URL: {e}"))?;
    anyhow::ensure!(
        matches!(parsed.scheme(), "http" | "https"),
        "--callback-url must be http or https"
    );
    Ok(())
}

pub async fn run(config: &Config, cmd: KeysCommand) -> anyhow::Result<()> {
    let db = super::database(config, 1).await?;
    let client = db.get().await?;
    match cmd {
        KeysCommand::Create {
            name,
            callback_url,
            agent,
            workspace,
            access,
            json,
        } => {
            anyhow::ensure!(!name.trim().is_empty(), "--name must not be empty");
            if let Some(url) = &callback_url {
                check_callback(url)?;
            }
            let agent = match &agent {
                Some(profile_key) => Some(
                    agents::by_key(&client, &workspace, profile_key)
                        .await?
                        .ok_or_else(|| {
                            anyhow::anyhow!(
                                "no agent {profile_key:?} in workspace {workspace:?} (hermes agents list --workspace {workspace})"
                            )
                        })?,
                ),
                None => None,
            };
            let ring = KeyRing::new(&config.router.secret_keys);
            anyhow::ensure!(
                ring.is_some() || callback_url.is_none(),
                "HERMES_SECRET_KEYS is not set: it seals the secret callbacks are signed with"
            );
            let created =
                api_keys::create(&client, name.trim(), callback_url.as_deref(), ring.as_ref())
                    .await?;
            access.save(&client, &created.key).await?;
            if let Some(a) = &agent {
                api_keys::set_agent(&client, created.key.id, a.id).await?;
            }
            let key = &api_keys::get(&client, created.key.id)
                .await?
                .ok_or_else(|| anyhow::anyhow!("the key vanished after creation"))?;
            if json {
                println!(
                    "{}",
                    json!({ "id": key.id, "name": key.name, "key": created.secret_key,
                            "callback_url": key.callback_url, "callback_secret": created.callback_secret,
                            "access": describe(key), "toolsets": key.toolsets,
                            "agent": agent_json(agent.as_ref()) })
                );
            } else {
                println!("created key {} ({}): {}", key.id, key.name, describe(key));
                if let Some(a) = &agent {
                    println!("speaks for agent {} ({})", a.profile_key, a.id);
                }
                println!("key: {}", created.secret_key);
                if let Some(secret) = &created.callback_secret {
                    println!("callback signing secret: {secret}");
                }
                println!("(shown once: only the key's hash and the sealed secret are stored)");
            }
        }
        KeysCommand::List { json } => {
            let keys = api_keys::list(&client).await?;
            let mut linked = Vec::with_capacity(keys.len());
            for k in &keys {
                linked.push(match k.agent_id {
                    Some(id) => agents::get(&client, id).await?,
                    None => None,
                });
            }
            if json {
                let rows: Vec<_> = keys
                    .iter()
                    .zip(&linked)
                    .map(|(k, a)| {
                        json!({ "id": k.id, "name": k.name, "prefix": k.prefix, "callback_url": k.callback_url,
                                "created_at": k.created_at, "revoked": k.revoked, "access": describe(k),
                                "toolsets": k.toolsets, "agent": agent_json(a.as_ref()) })
                    })
                    .collect();
                println!("{}", serde_json::Value::from(rows));
            } else if keys.is_empty() {
                println!("no keys");
            } else {
                for (k, a) in keys.iter().zip(&linked) {
                    let agent = a
                        .as_ref()
                        .map(|a| format!("  agent {}", a.profile_key))
                        .unwrap_or_default();
                    println!(
                        "{}  {:<20} {}…  {}  {}  ({}){agent}",
                        k.id,
                        k.name,
                        k.prefix,
                        k.callback_url.as_deref().unwrap_or("(polled)"),
                        if k.revoked { "REVOKED" } else { "live" },
                        describe(k)
                    );
                }
            }
        }
        KeysCommand::Revoke { id } => {
            anyhow::ensure!(
                api_keys::revoke(&client, id).await?,
                "no live key with id {id}"
            );
            println!("revoked {id}");
        }
        KeysCommand::Set { id, access } => {
            let key = api_keys::get(&client, id)
                .await?
                .filter(|k| !k.revoked)
                .ok_or_else(|| anyhow::anyhow!("no live key with id {id}"))?;
            access.save(&client, &key).await?;
            let key = api_keys::get(&client, id)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no live key with id {id}"))?;
            println!("key {id}: {}", describe(&key));
        }
        KeysCommand::RotateSecret { id, json } => {
            let ring = KeyRing::new(&config.router.secret_keys).ok_or_else(|| {
                anyhow::anyhow!(
                    "HERMES_SECRET_KEYS is not set: it seals the secret callbacks are signed with"
                )
            })?;
            let secret = api_keys::rotate_secret(&client, id, &ring)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no live key with id {id}"))?;
            if json {
                println!("{}", json!({ "id": id, "callback_secret": secret }));
            } else {
                println!("key {id}: new callback signing secret: {secret}");
                println!("(shown once; the old secret stops signing within 30 seconds)");
            }
        }
    }
    Ok(())
}
