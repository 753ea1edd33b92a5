//! `hermes api-keys`: keys of the REST channel. The key is printed once at creation; only
//! its hash is stored.

use clap::Subcommand;
use hermes_config::Config;
use hermes_db::{Db, api_keys};
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
            let (key, secret) =
                api_keys::create(&client, name.trim(), callback_url.as_deref()).await?;
            if json {
                println!(
                    "{}",
                    json!({ "id": key.id, "name": key.name, "key": secret, "callback_url": key.callback_url })
                );
            } else {
                println!("created key {} ({})", key.id, key.name);
                println!("key: {secret}");
                println!("(shown once: only its hash is stored)");
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
    }
    Ok(())
}
