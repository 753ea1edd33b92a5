//! The router's floor (docs/performance.md, Router): the router's own PostgreSQL work per
//! message — the prepare's reads and the commit's statements in the same transactions, on
//! the same migrated scratch database with the same seeded users — replayed through
//! `pgbench` with no Hermes code in the way. The statements live in `router_statements.sql`;
//! a commit group of `group` messages replays `group` messages' reads, then one transaction
//! holding all their commits, as the router's group commit does.

use std::path::PathBuf;
use std::process::Stdio;

use secrecy::{ExposeSecret, SecretString};

/// The router's statements for one message (see the file's header).
const STATEMENTS: &str = include_str!("router_statements.sql");

/// One pgbench run's outcome.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Replay {
    /// Messages per second: pgbench's transactions per second times the group.
    pub messages_per_sec: f64,
    /// Script runs that failed (a deadlock or serialization failure after every retry).
    pub failed: u64,
}

/// The pgbench script for a commit group of `group` messages: each message's prepare, then
/// one transaction with every message's commit.
pub(crate) fn script(group: usize) -> String {
    let body = STATEMENTS
        .split_once("-- @prepare\n")
        .map_or("", |(_, rest)| rest);
    let (prepare, commit) = body.split_once("-- @commit\n").unwrap_or((body, ""));
    let group = group.max(1);
    let each = |part: &str| -> String {
        (0..group)
            .map(|m| {
                part.replace("{m}", &m.to_string())
                    .replace("{g}", &group.to_string())
            })
            .collect()
    };
    format!("{}BEGIN;\n{}COMMIT;\n", each(prepare), each(commit))
}

/// pgbench's `tps = …` figure and its failed transactions, from its report.
pub(crate) fn parse_report(out: &str) -> Option<(f64, u64)> {
    let tps = out
        .lines()
        .find(|l| l.starts_with("tps = "))?
        .trim_start_matches("tps = ")
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let failed = out
        .lines()
        .find(|l| l.starts_with("number of failed transactions:"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Some((tps, failed))
}

/// What one replay needs.
pub(crate) struct Setup<'a> {
    pub url: &'a SecretString,
    pub users: u32,
    pub body_len: usize,
    pub clients: usize,
    pub secs: u64,
}

/// Replay the router's statements for `secs` seconds with `clients` connections, in commit
/// groups of `group` messages (at most one per user).
pub(crate) async fn replay(setup: &Setup<'_>, group: usize) -> anyhow::Result<Replay> {
    let group = group.clamp(1, setup.users.max(1) as usize);
    let file = ScriptFile::write(&script(group))?;
    let out = tokio::process::Command::new(pgbench())
        .args(["-n", "-M", "prepared", "--max-tries=10"])
        .arg(format!("--client={}", setup.clients.max(1)))
        .arg(format!("--jobs={}", setup.clients.clamp(1, 2)))
        .arg(format!("--time={}", setup.secs.max(1)))
        .arg(format!("--define=users={}", setup.users))
        .arg(format!("--define=body_len={}", setup.body_len.max(1)))
        .arg(format!("--file={}", file.0.display()))
        .arg(setup.url.expose_secret())
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", pgbench()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(
        out.status.success(),
        "pgbench failed ({}): {}",
        out.status,
        stderr.lines().rev().take(5).collect::<Vec<_>>().join(" / ")
    );
    let (tps, failed) =
        parse_report(&stdout).ok_or_else(|| anyhow::anyhow!("pgbench printed no tps: {stdout}"))?;
    Ok(Replay {
        messages_per_sec: tps * group.max(1) as f64,
        failed,
    })
}

/// The pgbench to run: `PGBENCH` if set, else the one on the PATH.
fn pgbench() -> String {
    std::env::var("PGBENCH").unwrap_or_else(|_| "pgbench".into())
}

/// The script in a temporary file, removed when dropped.
struct ScriptFile(PathBuf);

impl ScriptFile {
    fn write(script: &str) -> anyhow::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "hermes-router-floor-{}.sql",
            &uuid::Uuid::now_v7().simple().to_string()[20..]
        ));
        std::fs::write(&path, script)?;
        Ok(Self(path))
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_reads_each_message_then_commits_them_in_one_transaction() {
        let one = script(1);
        assert_eq!(one.matches("BEGIN;").count(), 1);
        assert_eq!(one.matches("FROM user_channels c").count(), 1);
        assert!(!one.contains("{m}"));
        let three = script(3);
        assert_eq!(three.matches("BEGIN;").count(), 1);
        assert_eq!(three.matches("COMMIT;").count(), 1);
        assert_eq!(three.matches("FOR UPDATE),").count(), 3);
        // Every read comes before the transaction; the ids of message 2 are its own.
        let begin = three.find("BEGIN;").unwrap();
        assert!(three.rfind("FROM user_channels c").unwrap() < begin);
        assert!(three.contains(":uid2") && three.contains("AS uid2"));
        assert!(three.contains("random(1 + 2 * :users / 3, (2 + 1) * :users / 3)"));
        assert!(!three.contains("{g}"));
    }

    #[test]
    fn the_report_gives_tps_and_failures() {
        let out = "number of transactions actually processed: 1200\n\
                   number of failed transactions: 3 (0.250%)\n\
                   latency average = 26.1 ms\n\
                   tps = 1224.617391 (without initial connection time)\n";
        assert_eq!(parse_report(out), Some((1224.617391, 3)));
        assert_eq!(parse_report("nothing"), None);
    }
}
