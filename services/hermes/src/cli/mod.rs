//! The operator commands of the `hermes` binary, one file per command group, named after it
//! (`hermes api-keys` is `api_keys.rs`); `main.rs` parses the command line and calls them.
//! The services themselves start from the library root (`crate::run`).

pub mod agents;
pub mod agents_backend;
pub mod agents_probe;
pub mod api_keys;
pub mod approvals;
pub mod channels;
pub mod dlq;
pub mod doctor;
pub mod jobs;
pub mod jobs_api;
pub mod killswitch;
pub mod mcp;
pub mod runs;
pub mod tools;
pub mod users;
pub mod workspaces;

use hermes_config::Config;
use hermes_db::Db;

/// The database of an operator command: `connections` pooled, refused on an older schema
/// (a command never migrates; `hermes migrate` does).
pub(crate) async fn database(config: &Config, connections: usize) -> anyhow::Result<Db> {
    let db = Db::new(&config.database_url, connections)?;
    db.check_schema().await?;
    Ok(db)
}
