//! `hermes tools reload`: every tools replica of this namespace re-reads its configuration
//! file and reconnects its MCP servers (see `hermes_tools::reload`).

use clap::Subcommand;
use hermes_config::Config;
use hermes_db::Db;

#[derive(Subcommand)]
pub enum ToolsCommand {
    /// Make every tools replica of this namespace re-read its configuration file (MCP
    /// servers, [tools]) and reconnect; a replica whose file is invalid keeps its current one.
    Reload,
}

pub async fn run(config: &Config, cmd: ToolsCommand) -> anyhow::Result<()> {
    match cmd {
        ToolsCommand::Reload => {
            let db = Db::new(&config.database_url, 1)?;
            let client = db.get().await?;
            hermes_tools::reload::request(&client, config.namespace.as_str()).await?;
            println!(
                "reload requested: every tools replica of namespace {} re-reads its configuration",
                config.namespace.as_str()
            );
            Ok(())
        }
    }
}
