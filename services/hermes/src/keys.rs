//! `hermes api-keys`: keys of the REST channel. The key is printed once at creation; only
//! its hash is stored. So is the key's callback signing secret (Standard Webhooks), which
//! is stored sealed with HERMES_SECRET_KEYS and can be rotated.

use clap::Subcommand;
use hermes_config::Config;
use hermes_db::{Db, api_keys};
use hermes_net::keyring::KeyRing;
use serde_json::json;

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
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
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
    let db = Db::new(&config.database_url, 1)?;
    db.check_schema().await?;
    let client = db.get().await?;
    match cmd {
        KeysCommand::Create {
            name,
            callback_url,
            json,
        } => {
            anyhow::ensure!(!name.trim().is_empty(), "--name must not be empty");
            if let Some(url) = &callback_url {
                check_callback(url)?;
            }
            let ring = KeyRing::new(&config.router.secret_keys);
            anyhow::ensure!(
                ring.is_some() || callback_url.is_none(),
                "HERMES_SECRET_KEYS is not set: it seals the secret callbacks are signed with"
            );
            let created =
                api_keys::create(&client, name.trim(), callback_url.as_deref(), ring.as_ref())
                    .await?;
            let key = &created.key;
            if json {
                println!(
                    "{}",
                    json!({ "id": key.id, "name": key.name, "key": created.secret_key,
                            "callback_url": key.callback_url, "callback_secret": created.callback_secret })
                );
            } else {
                println!("created key {} ({})", key.id, key.name);
                println!("key: {}", created.secret_key);
                if let Some(secret) = &created.callback_secret {
                    println!("callback signing secret: {secret}");
                }
                println!("(shown once: only the key's hash and the sealed secret are stored)");
            }
        }
        KeysCommand::List { json } => {
            let keys = api_keys::list(&client).await?;
            if json {
                let rows: Vec<_> = keys
                    .iter()
                    .map(|k| {
                        json!({ "id": k.id, "name": k.name, "prefix": k.prefix, "callback_url": k.callback_url,
                                "created_at": k.created_at, "revoked": k.revoked })
                    })
                    .collect();
                println!("{}", serde_json::Value::from(rows));
            } else if keys.is_empty() {
                println!("no keys");
            } else {
                for k in keys {
                    println!(
                        "{}  {:<20} {}…  {}  {}",
                        k.id,
                        k.name,
                        k.prefix,
                        k.callback_url.as_deref().unwrap_or("(polled)"),
                        if k.revoked { "REVOKED" } else { "live" }
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
