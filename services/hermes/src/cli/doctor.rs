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

/// What the server says of its replication: what its commits wait for and what they have.
#[derive(Debug, Default)]
struct Replication {
    /// `synchronous_standby_names`: empty when no commit waits for a standby.
    required: String,
    /// Is this server a standby (a read-only replica) rather than the primary?
    in_recovery: bool,
    /// Standbys streaming from this server, how many of them count for commits, and how many
    /// whose state this role may not read (it needs `pg_monitor`).
    streaming: i64,
    synchronous: i64,
    unreadable: i64,
    /// Sessions whose commit waits for a standby now, and the longest wait in seconds.
    waiting: i64,
    longest_secs: i64,
}

async fn replication(client: &hermes_db::Client) -> Result<Replication, hermes_db::DbError> {
    let row = client
        .query_one(
            "SELECT current_setting('synchronous_standby_names'), pg_is_in_recovery(), \
             (SELECT count(*) FROM pg_stat_replication), \
             (SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')), \
             (SELECT count(*) FROM pg_stat_replication WHERE sync_state IS NULL), \
             (SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'), \
             (SELECT COALESCE(max(extract(epoch FROM now() - query_start)), 0)::bigint \
              FROM pg_stat_activity WHERE wait_event = 'SyncRep')",
            &[],
        )
        .await
        .map_err(hermes_db::DbError::from)?;
    Ok(Replication {
        required: row.get(0),
        in_recovery: row.get(1),
        streaming: row.get(2),
        synchronous: row.get(3),
        unreadable: row.get(4),
        waiting: row.get(5),
        longest_secs: row.get(6),
    })
}

/// Whether commits can finish: a primary that requires a synchronous standby and has none
/// holds every commit, which stalls the whole fleet with nothing lost (docs/deploy.md,
/// "Durability of the dependencies").
fn durability(r: &Replication) -> Check {
    const SEE: &str = "docs/deploy.md, \"Durability of the dependencies\"";
    let (ok, detail) = if r.in_recovery {
        (
            false,
            "this server is a standby (read-only): DATABASE_URL must reach the primary".to_string(),
        )
    } else if r.required.trim().is_empty() {
        (
            true,
            format!(
                "asynchronous: commits wait for no standby ({} streaming); a failover may lose \
                 the last commits ({SEE})",
                r.streaming
            ),
        )
    } else if r.synchronous == 0 && r.unreadable > 0 {
        (
            true,
            format!(
                "commits wait for a synchronous standby (synchronous_standby_names = '{}'); {} \
                 standby(s) stream, whose state this role cannot read (grant it pg_monitor)",
                r.required, r.streaming
            ),
        )
    } else if r.synchronous == 0 {
        (
            false,
            format!(
                "commits wait for a synchronous standby (synchronous_standby_names = '{}') and \
                 none is connected ({} streaming): {} commit(s) waiting, the longest {} s. \
                 Bring a standby back, or relax the setting ({SEE})",
                r.required, r.streaming, r.waiting, r.longest_secs
            ),
        )
    } else {
        (
            true,
            format!(
                "synchronous: {} of {} streaming standby(s) confirm commits \
                 (synchronous_standby_names = '{}')",
                r.synchronous, r.streaming, r.required
            ),
        )
    };
    Check {
        name: "durability",
        ok,
        detail,
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
        let replication = replication(&client).await.map_err(|e| e.to_string())?;
        Ok::<_, String>((found, max.parse::<usize>().unwrap_or(0), replication))
    };
    let needed = migrate::latest_version();
    match tokio::time::timeout(TIMEOUT, pg).await {
        Ok(Ok((found, max_connections, replication))) => {
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
            out.push(durability(&replication));
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
        config.ingest.check().err().map(|e| {
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
    fn the_durability_check_names_a_primary_without_its_required_standby() {
        let stalled = Replication {
            required: "ANY 1 (*)".into(),
            waiting: 3,
            longest_secs: 42,
            ..Default::default()
        };
        let c = durability(&stalled);
        assert!(!c.ok, "{}", c.detail);
        assert!(
            c.detail.contains("none is connected")
                && c.detail.contains("3 commit(s) waiting, the longest 42 s"),
            "{}",
            c.detail
        );
        let served = Replication {
            required: "ANY 1 (*)".into(),
            streaming: 1,
            synchronous: 1,
            ..Default::default()
        };
        assert!(durability(&served).ok);
        let asynchronous = Replication::default();
        let c = durability(&asynchronous);
        assert!(c.ok && c.detail.starts_with("asynchronous"), "{}", c.detail);
        let standby = Replication {
            in_recovery: true,
            ..Default::default()
        };
        assert!(!durability(&standby).ok);
        // A role without pg_monitor sees standbys but not their state: not a failure.
        let unreadable = Replication {
            required: "ANY 1 (*)".into(),
            streaming: 1,
            unreadable: 1,
            ..Default::default()
        };
        assert!(durability(&unreadable).ok);
    }

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
