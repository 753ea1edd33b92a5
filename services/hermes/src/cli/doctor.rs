//! `hermes doctor`: the effective configuration with secrets masked, and a check of each
//! server Hermes needs. Exits non-zero naming every problem found.

use std::time::Duration;

use hermes_cache::Cache;
use hermes_config::Config;
use hermes_config::mask_url;
use hermes_db::{Db, migrate};
use hermes_telemetry::Metrics;
use secrecy::ExposeSecret;

/// The three connection URLs (only ever printed through `mask_url`).
fn expose(c: &Config) -> [String; 3] {
    [
        c.database_url.expose_secret().to_string(),
        c.amqp_url.expose_secret().to_string(),
        c.redis_url.expose_secret().to_string(),
    ]
}

const TIMEOUT: Duration = Duration::from_secs(5);

/// The verdict of a reachability probe bounded by [`TIMEOUT`].
fn reachability<E: std::fmt::Display>(
    name: &'static str,
    url: &str,
    result: Result<Result<(), E>, tokio::time::error::Elapsed>,
) -> Check {
    let url = mask_url(url);
    match result {
        Ok(Ok(())) => Check {
            name,
            ok: true,
            detail: format!("reachable at {url}"),
        },
        Ok(Err(e)) => Check {
            name,
            ok: false,
            detail: format!("unreachable at {url}: {e}"),
        },
        Err(_) => Check {
            name,
            ok: false,
            detail: format!("no answer within {TIMEOUT:?} at {url}"),
        },
    }
}

/// One check's verdict.
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// Connections a process may open: its pool, the outbox relay's `LISTEN`, and one spare.
fn per_process(pool: usize) -> usize {
    pool + 2
}

/// Kept free of the fleet for `hermes` commands, superusers and monitoring.
const SPARE_CONNECTIONS: usize = 10;

/// Whether the five services, one process each, fit under the server's `max_connections`
/// with this pool size, and how many processes fit (docs/deploy.md, known limits).
fn connections(pool: usize, max_connections: usize) -> Check {
    let fit = max_connections.saturating_sub(SPARE_CONNECTIONS) / per_process(pool);
    Check {
        name: "connections",
        ok: fit >= 5,
        detail: format!(
            "max_connections {max_connections} leaves room for {fit} processes at HERMES_DB_POOL_SIZE={pool} \
             ({} each, {SPARE_CONNECTIONS} kept spare): keep the sum of all replicas under it{}",
            per_process(pool),
            if fit >= 5 {
                String::new()
            } else {
                " (not even one process per service fits: lower the pool or raise the limit)".into()
            }
        ),
    }
}

/// Run every check; the caller prints them.
pub async fn checks(config: &Config) -> Vec<Check> {
    let [db_url, amqp_url, redis_url] = expose(config);
    let mut out = Vec::new();

    let pg = async {
        let db = Db::new(&config.database_url, 1).map_err(|e| e.to_string())?;
        let client = db.get().await.map_err(|e| e.to_string())?;
        let found = migrate::current_version(&client)
            .await
            .map_err(|e| e.to_string())?;
        let max: String = client
            .query_one("SHOW max_connections", &[])
            .await
            .map_err(|e| e.to_string())?
            .get(0);
        Ok::<_, String>((found, max.parse::<usize>().unwrap_or(0)))
    };
    let needed = migrate::latest_version();
    match tokio::time::timeout(TIMEOUT, pg).await {
        Ok(Ok((found, max_connections))) => {
            out.push(Check {
                name: "PostgreSQL",
                ok: true,
                detail: format!("reachable at {}", mask_url(&db_url)),
            });
            out.push(Check {
                name: "schema",
                ok: found >= needed,
                detail: if found >= needed {
                    format!("version {found} (this build needs {needed})")
                } else {
                    format!("version {found}, this build needs {needed}: run `hermes migrate`")
                },
            });
            out.push(connections(config.db_pool_size, max_connections));
        }
        Ok(Err(e)) => out.push(Check {
            name: "PostgreSQL",
            ok: false,
            detail: format!("unreachable at {}: {e}", mask_url(&db_url)),
        }),
        Err(_) => out.push(Check {
            name: "PostgreSQL",
            ok: false,
            detail: format!("no answer within {TIMEOUT:?} at {}", mask_url(&db_url)),
        }),
    }

    out.push(reachability(
        "RabbitMQ",
        &amqp_url,
        tokio::time::timeout(TIMEOUT, hermes_bus::probe(&config.amqp_url)).await,
    ));

    let redis = async {
        let cache = Cache::new(&config.redis_url, config.namespace.clone(), Metrics::new())
            .map_err(|e| e.to_string())?;
        cache.ping().await.map_err(|e| e.to_string())
    };
    out.push(reachability(
        "Redis",
        &redis_url,
        tokio::time::timeout(TIMEOUT, redis).await,
    ));
    out
}

/// Print the configuration and the checks; the number of failed checks.
pub async fn run(config: &Config) -> usize {
    println!("Effective configuration (secrets masked):");
    // One row per variable declared in `hermes_config::env`, masked by its declaration.
    for (name, value) in config.describe() {
        println!("  {name:<28} {value}");
    }
    println!();
    println!("Checks:");
    let checks = checks(config).await;
    for c in &checks {
        println!(
            "  [{}] {:<11} {}",
            if c.ok { " ok " } else { "FAIL" },
            c.name,
            c.detail
        );
    }
    let notes = [
        config
            .check_llm()
            .err()
            .map(|e| format!("the llm service will not start: {}", e.problems.join("; "))),
        config.check_ingest().err().map(|e| {
            format!(
                "the ingest service will not start: {}",
                e.problems.join("; ")
            )
        }),
    ];
    for n in notes.into_iter().flatten() {
        println!("  [warn] {n}");
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    println!();
    if failed == 0 {
        println!("All checks passed.");
    } else {
        let names: Vec<&str> = checks.iter().filter(|c| !c.ok).map(|c| c.name).collect();
        println!("{failed} check(s) failed: {}", names.join(", "));
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_check_counts_processes_that_fit() {
        // 100 - 10 spare = 90, at 18 a process: 5.
        let c = connections(16, 100);
        assert!(c.ok, "{}", c.detail);
        assert!(c.detail.contains("room for 5 processes"), "{}", c.detail);
        let c = connections(32, 100);
        assert!(!c.ok, "{}", c.detail);
        assert!(c.detail.contains("room for 2 processes"), "{}", c.detail);
    }
}
