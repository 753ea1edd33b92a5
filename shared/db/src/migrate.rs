//! `hermes migrate`: plain SQL files from `migrations/`, embedded in the binary, applied in
//! order under a PostgreSQL advisory lock so a Kubernetes Job and a developer never race.
//! Each file runs in its own transaction; its checksum is recorded and re-checked.

use sha2::{Digest, Sha256};

use super::{Client, Db, DbError};

/// One embedded migration.
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration of this build, in order. Add new files at the end; never edit applied ones.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_init",
        sql: include_str!("../../../migrations/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "0002_channels",
        sql: include_str!("../../../migrations/0002_channels.sql"),
    },
    Migration {
        version: 3,
        name: "0003_router",
        sql: include_str!("../../../migrations/0003_router.sql"),
    },
    Migration {
        version: 4,
        name: "0004_local_relay",
        sql: include_str!("../../../migrations/0004_local_relay.sql"),
    },
    Migration {
        version: 5,
        name: "0005_session_scope_index",
        sql: include_str!("../../../migrations/0005_session_scope_index.sql"),
    },
    Migration {
        version: 6,
        name: "0006_run_cost",
        sql: include_str!("../../../migrations/0006_run_cost.sql"),
    },
    Migration {
        version: 7,
        name: "0007_llm",
        sql: include_str!("../../../migrations/0007_llm.sql"),
    },
    Migration {
        version: 8,
        name: "0008_webhook_attempts",
        sql: include_str!("../../../migrations/0008_webhook_attempts.sql"),
    },
    Migration {
        version: 9,
        name: "0009_budgets",
        sql: include_str!("../../../migrations/0009_budgets.sql"),
    },
    Migration {
        version: 10,
        name: "0010_delivery_sends",
        sql: include_str!("../../../migrations/0010_delivery_sends.sql"),
    },
    Migration {
        version: 11,
        name: "0011_keys_and_tenants",
        sql: include_str!("../../../migrations/0011_keys_and_tenants.sql"),
    },
    Migration {
        version: 12,
        name: "0012_agent_tool_allowlist",
        sql: include_str!("../../../migrations/0012_agent_tool_allowlist.sql"),
    },
    Migration {
        version: 13,
        name: "0013_retention",
        sql: include_str!("../../../migrations/0013_retention.sql"),
    },
    Migration {
        version: 14,
        name: "0014_run_control",
        sql: include_str!("../../../migrations/0014_run_control.sql"),
    },
    Migration {
        version: 15,
        name: "0015_runs_cancelled",
        sql: include_str!("../../../migrations/0015_runs_cancelled.sql"),
    },
    Migration {
        version: 16,
        name: "0016_responses",
        sql: include_str!("../../../migrations/0016_responses.sql"),
    },
    Migration {
        version: 17,
        name: "0017_jobs",
        sql: include_str!("../../../migrations/0017_jobs.sql"),
    },
    Migration {
        version: 18,
        name: "0018_agent_contract",
        sql: include_str!("../../../migrations/0018_agent_contract.sql"),
    },
    Migration {
        version: 19,
        name: "0019_operator_mcp",
        sql: include_str!("../../../migrations/0019_operator_mcp.sql"),
    },
    Migration {
        version: 20,
        name: "0020_whatsapp_windows",
        sql: include_str!("../../../migrations/0020_whatsapp_windows.sql"),
    },
    Migration {
        version: 21,
        name: "0021_statuses_bursts",
        sql: include_str!("../../../migrations/0021_statuses_bursts.sql"),
    },
    Migration {
        version: 22,
        name: "0022_outbox_hold",
        sql: include_str!("../../../migrations/0022_outbox_hold.sql"),
    },
    Migration {
        version: 23,
        name: "0023_forge_hardening",
        sql: include_str!("../../../migrations/0023_forge_hardening.sql"),
    },
    Migration {
        version: 24,
        name: "0024_idempotency_records",
        sql: include_str!("../../../migrations/0024_idempotency_records.sql"),
    },
    Migration {
        version: 25,
        name: "0025_agent_rules",
        sql: include_str!("../../../migrations/0025_agent_rules.sql"),
    },
    Migration {
        version: 26,
        name: "0026_forge_contract",
        sql: include_str!("../../../migrations/0026_forge_contract.sql"),
    },
    Migration {
        version: 27,
        name: "0027_dispatcher_side",
        sql: include_str!("../../../migrations/0027_dispatcher_side.sql"),
    },
    Migration {
        version: 28,
        name: "0028_opt_outs",
        sql: include_str!("../../../migrations/0028_opt_outs.sql"),
    },
    Migration {
        version: 29,
        name: "0029_messenger_windows",
        sql: include_str!("../../../migrations/0029_messenger_windows.sql"),
    },
    Migration {
        version: 30,
        name: "0030_forge_presence",
        sql: include_str!("../../../migrations/0030_forge_presence.sql"),
    },
    Migration {
        version: 31,
        name: "0031_forge_answers",
        sql: include_str!("../../../migrations/0031_forge_answers.sql"),
    },
    Migration {
        version: 32,
        name: "0032_workspace_api",
        sql: include_str!("../../../migrations/0032_workspace_api.sql"),
    },
    Migration {
        version: 33,
        name: "0033_dreams",
        sql: include_str!("../../../migrations/0033_dreams.sql"),
    },
    Migration {
        version: 34,
        name: "0034_api_sessions",
        sql: include_str!("../../../migrations/0034_api_sessions.sql"),
    },
    Migration {
        version: 35,
        name: "0035_proxied_messages",
        sql: include_str!("../../../migrations/0035_proxied_messages.sql"),
    },
    Migration {
        version: 36,
        name: "0036_a2a",
        sql: include_str!("../../../migrations/0036_a2a.sql"),
    },
    Migration {
        version: 37,
        name: "0037_console_sessions",
        sql: include_str!("../../../migrations/0037_console_sessions.sql"),
    },
    Migration {
        version: 38,
        name: "0038_delegations",
        sql: include_str!("../../../migrations/0038_delegations.sql"),
    },
    Migration {
        version: 39,
        name: "0039_agent_runs_by_agent",
        sql: include_str!("../../../migrations/0039_agent_runs_by_agent.sql"),
    },
    Migration {
        version: 40,
        name: "0040_agent_runs_by_time",
        sql: include_str!("../../../migrations/0040_agent_runs_by_time.sql"),
    },
    Migration {
        version: 41,
        name: "0041_agent_runs_by_chat",
        sql: include_str!("../../../migrations/0041_agent_runs_by_chat.sql"),
    },
    Migration {
        version: 42,
        name: "0042_agent_runs_model_calls",
        sql: include_str!("../../../migrations/0042_agent_runs_model_calls.sql"),
    },
];

/// Arbitrary constant naming Hermes' migration lock.
const LOCK_KEY: i64 = 0x4845_524D_4553; // "HERMES"

pub fn latest_version() -> i64 {
    MIGRATIONS.last().map(|m| m.version).unwrap_or(0)
}

fn checksum(sql: &str) -> String {
    hex::encode(Sha256::digest(sql.as_bytes()))
}

/// The highest applied version (0 on an empty database).
pub async fn current_version(client: &Client) -> Result<i64, DbError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let v: Option<i64> = client
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await?
        .get(0);
    Ok(v.unwrap_or(0))
}

/// What `migrate` did.
#[derive(Debug, Default)]
pub struct Report {
    pub applied: Vec<String>,
    pub already: usize,
}

/// Create the target database when it does not exist (a fresh laptop or CI machine).
/// Returns true when it was created. Needs CREATEDB; production databases usually exist.
pub async fn ensure_database(db: &Db) -> Result<bool, DbError> {
    let cfg = db.pg_config().clone();
    match cfg.connect(db.tls()).await {
        Ok(_) => return Ok(false),
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_DATABASE) => {}
        Err(e) => return Err(DbError::Query(e)),
    }
    let name = cfg.get_dbname().unwrap_or("postgres").to_string();
    let mut admin = cfg.clone();
    admin.dbname("postgres");
    let (client, conn) = admin.connect(db.tls()).await?;
    let driver = tokio::spawn(conn);
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    let result = client
        .batch_execute(&format!("CREATE DATABASE {quoted}"))
        .await;
    drop(client);
    let _ = driver.await;
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::DUPLICATE_DATABASE) => {
            Ok(false)
        }
        Err(e) => Err(DbError::Query(e)),
    }
}

/// Apply every pending migration under the advisory lock.
pub async fn run(db: &Db) -> Result<Report, DbError> {
    let mut client = db.get().await?;
    client
        .execute("SELECT pg_advisory_lock($1)", &[&LOCK_KEY])
        .await?;
    let result = apply(&mut client).await;
    let unlock = client
        .execute("SELECT pg_advisory_unlock($1)", &[&LOCK_KEY])
        .await;
    let report = result?;
    unlock?;
    Ok(report)
}

async fn apply(client: &mut Client) -> Result<Report, DbError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                version    bigint PRIMARY KEY,
                name       text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await?;
    let applied: Vec<(i64, String)> = client
        .query("SELECT version, checksum FROM schema_migrations", &[])
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let mut report = Report::default();
    for m in MIGRATIONS {
        let sum = checksum(m.sql);
        if let Some((_, recorded)) = applied.iter().find(|(v, _)| *v == m.version) {
            if *recorded != sum {
                return Err(DbError::MigrationChanged {
                    version: m.version,
                    name: m.name.into(),
                });
            }
            report.already += 1;
            continue;
        }
        let tx = client.transaction().await?;
        tx.batch_execute(m.sql).await?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &sum],
        )
        .await?;
        tx.commit().await?;
        tracing::info!(version = m.version, name = m.name, "migration applied");
        report.applied.push(m.name.to_string());
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_in_order_and_named_after_their_files() {
        // Contiguous: a missing entry would leave a file unapplied.
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1);
            assert!(m.name.starts_with(&format!("{:04}_", m.version)));
            assert!(!m.sql.trim().is_empty());
        }
    }
}
