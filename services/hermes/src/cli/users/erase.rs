//! `hermes users erase`: remove a person's data everywhere, for privacy requests
//! (`docs/security.md`, "Erasing a person"), through `hermes_operator::erase`, which the
//! console's users page shares. Without `--yes` it only counts what would go.

use std::io::Write;

use anyhow::Context;
use hermes_cache::Cache;
use hermes_config::Config;
use hermes_db::Db;
use hermes_operator::erase;
use hermes_telemetry::Metrics;
use hermes_types::ids::UserId;

/// Erase (or with `yes` false, count) user `id`, writing progress to `out`.
pub async fn run(
    config: &Config,
    id: UserId,
    yes: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let db = Db::new(&config.database_url, 2)?;
    let cache = Cache::new(&config.redis_url, config.namespace.clone(), Metrics::new())?;
    let client = db.get().await.context("cannot reach PostgreSQL")?;
    if !yes {
        let found = erase::count(config, &client, &cache, id).await?;
        writeln!(out, "user {id} would be erased:")?;
        for (table, n) in found.tables {
            writeln!(out, "  postgres {table}: {n} rows")?;
        }
        writeln!(out, "  redis: {} keys", found.redis_keys)?;
        writeln!(out, "nothing was removed: run again with --yes to erase")?;
        return Ok(());
    }
    writeln!(out, "erasing user {id}")?;
    let done = erase::erase(config, &client, &cache, id, |table, n| {
        let _ = writeln!(out, "  postgres {table}: {n} rows removed");
    })
    .await?;
    writeln!(out, "  redis: {} keys removed", done.redis_keys)?;
    writeln!(out, "user {id} erased")?;
    Ok(())
}
