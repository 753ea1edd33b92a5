//! What the infrastructure spent for the fleet's answers (docs/performance.md, "Whole
//! fleet"): the CPU time of the PostgreSQL, RabbitMQ and Redis servers on this machine (from
//! `/proc`), PostgreSQL's transactions, rows written and WAL bytes (`pg_stat_database`,
//! `pg_stat_wal`), its statements when `pg_stat_statements` is loaded, and the broker
//! publishes and run stream reads the fleet made (its own `hermes_bus_published_total` and
//! `hermes_run_event_reads_total`). Read before and after a
//! measured step, divided by the answers of the step.
//!
//! The servers are shared: their CPU and WAL include whatever else ran on them during the
//! step, so the machine's state is printed beside the figures. The transaction and row counts
//! are the scratch database's own, so no other user's work is in them.

use std::collections::BTreeMap;

use hermes_db::Db;

use crate::procstat;

/// A server process family on this machine, found by its command name in `/proc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Server {
    Postgres,
    RabbitMq,
    Redis,
}

impl Server {
    const ALL: [Server; 3] = [Server::Postgres, Server::RabbitMq, Server::Redis];

    pub fn name(self) -> &'static str {
        match self {
            Server::Postgres => "postgresql",
            Server::RabbitMq => "rabbitmq",
            Server::Redis => "redis",
        }
    }

    /// Whether a process of this command name (`/proc/<pid>/comm`) belongs to the server.
    /// PostgreSQL's backends rename themselves (`postgres: walwriter`), RabbitMQ runs in the
    /// Erlang VM (`beam.smp`, with its helper `erl_child_setup` and `epmd`).
    fn owns(self, comm: &str) -> bool {
        match self {
            Server::Postgres => comm.starts_with("postgres"),
            Server::RabbitMq => comm == "beam.smp" || comm == "erl_child_setup" || comm == "epmd",
            Server::Redis => comm.starts_with("redis-server"),
        }
    }

    fn of(comm: &str) -> Option<Server> {
        Server::ALL.into_iter().find(|s| s.owns(comm))
    }
}

/// CPU ticks of each server family, summed over its processes now.
fn server_ticks() -> BTreeMap<Server, u64> {
    // A process that ended between the listing and the read adds nothing; its time is lost
    // from the sum, which only ever makes the servers look cheaper.
    per_server(procstat::process_ticks)
}

/// Resident memory (KiB) of each server family, summed over its processes now. Shared memory
/// (PostgreSQL's buffers) is counted once per process that touched it, so the sum is an upper
/// bound, and backends come and go with connections: a label beside the fleet's figures, not
/// a target.
pub fn server_rss_kib() -> BTreeMap<Server, u64> {
    per_server(|pid| Some(procstat::read(pid)?.rss_kib))
}

/// `read` of every process of each server family, summed per family.
fn per_server(read: impl Fn(u32) -> Option<u64>) -> BTreeMap<Server, u64> {
    let mut sums = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return sums;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) else {
            continue;
        };
        if let Some((server, v)) = Server::of(comm.trim()).and_then(|s| Some((s, read(pid)?))) {
            *sums.entry(server).or_insert(0) += v;
        }
    }
    sums
}

/// PostgreSQL's counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct PgCounters {
    /// Committed and rolled-back transactions of the scratch database.
    transactions: i64,
    /// Rows inserted, updated and deleted in the scratch database.
    rows_written: i64,
    /// WAL bytes the whole server wrote.
    wal_bytes: f64,
    /// Statements executed in the scratch database, when `pg_stat_statements` is loaded.
    statements: Option<i64>,
}

/// Read the scratch database's counters. `pg_stat_database` is updated when a backend
/// reports, so the caller reads after the step has ended and its connections went idle.
async fn pg_counters(db: &Db) -> anyhow::Result<PgCounters> {
    let client = db.get().await?;
    // A snapshot of the statistics is cached per transaction; start from a fresh one.
    client
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .await?;
    let row = client
        .query_one(
            "SELECT (xact_commit + xact_rollback)::bigint,
                    (tup_inserted + tup_updated + tup_deleted)::bigint,
                    (SELECT wal_bytes::float8 FROM pg_stat_wal)
               FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await?;
    // Present only where the server preloads the library and the database has the
    // extension; anywhere else the column is left out of the report, not guessed.
    let statements = client
        .query_opt(
            "SELECT sum(calls)::bigint FROM pg_stat_statements
              WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
            &[],
        )
        .await
        .ok()
        .flatten()
        .and_then(|r| r.get::<_, Option<i64>>(0));
    Ok(PgCounters {
        transactions: row.get(0),
        rows_written: row.get(1),
        wal_bytes: row.get(2),
        statements,
    })
}

/// The sum of `hermes_bus_published_total` over every process's admin `/metrics`.
async fn published(client: &reqwest::Client, admin_ports: &[u16]) -> f64 {
    metric_sum(client, admin_ports, "hermes_bus_published_total").await
}

/// The sum of every series of `metric` over every process's admin `/metrics` (a process that
/// does not answer adds nothing).
pub async fn metric_sum(client: &reqwest::Client, admin_ports: &[u16], metric: &str) -> f64 {
    let mut total = 0.0;
    for port in admin_ports {
        let url = format!("http://127.0.0.1:{port}/metrics");
        let Ok(resp) = client.get(&url).send().await else {
            continue;
        };
        let Ok(text) = resp.text().await else {
            continue;
        };
        total += sum_of(&text, metric);
    }
    total
}

/// The sum of every series of `metric` in a Prometheus text exposition.
fn sum_of(exposition: &str, metric: &str) -> f64 {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(metric)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Everything read at one instant.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    ticks: BTreeMap<Server, u64>,
    pg: PgCounters,
    published: f64,
    stream_reads: f64,
}

impl Snapshot {
    /// Read the servers, the scratch database and the publish counters now: those of the
    /// processes serving `admin_ports`, plus `local` (publishes made in this process).
    pub async fn take(
        db: &Db,
        client: &reqwest::Client,
        admin_ports: &[u16],
        local: f64,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            ticks: server_ticks(),
            pg: pg_counters(db).await?,
            published: published(client, admin_ports).await + local,
            stream_reads: metric_sum(client, admin_ports, "hermes_run_event_reads_total").await,
        })
    }
}

/// The infrastructure's cost of one answer between two snapshots.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerAnswer {
    /// CPU milliseconds of each server family.
    pub cpu_ms: Vec<(Server, f64)>,
    pub transactions: f64,
    pub rows_written: f64,
    pub wal_bytes: f64,
    pub statements: Option<f64>,
    pub publishes: f64,
    /// Reads of run event streams by ingest's waiting callers.
    pub stream_reads: f64,
}

impl PerAnswer {
    pub fn between(before: &Snapshot, after: &Snapshot, answers: usize) -> Self {
        let n = answers.max(1) as f64;
        let per = |a: f64, b: f64| (a - b).max(0.0) / n;
        Self {
            cpu_ms: Server::ALL
                .into_iter()
                .map(|s| {
                    let a = after.ticks.get(&s).copied().unwrap_or(0);
                    let b = before.ticks.get(&s).copied().unwrap_or(0);
                    (s, procstat::ticks_to_ms(a.saturating_sub(b)) / n)
                })
                .collect(),
            transactions: per(after.pg.transactions as f64, before.pg.transactions as f64),
            rows_written: per(after.pg.rows_written as f64, before.pg.rows_written as f64),
            wal_bytes: per(after.pg.wal_bytes, before.pg.wal_bytes),
            statements: match (after.pg.statements, before.pg.statements) {
                (Some(a), Some(b)) => Some(per(a as f64, b as f64)),
                _ => None,
            },
            publishes: per(after.published, before.published),
            stream_reads: per(after.stream_reads, before.stream_reads),
        }
    }
}

/// The machine's state, printed beside the figures: its load average and the CPU time of
/// every process that is neither the fleet's nor a server's (a compiler or another benchmark
/// running beside this one), to compare two readings.
pub struct Machine {
    load: String,
    others: BTreeMap<u32, (String, u64)>,
}

impl Machine {
    pub fn now(fleet_pids: &[u32]) -> Self {
        let me = std::process::id();
        let others = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| *pid != me && !fleet_pids.contains(pid))
            .filter_map(|pid| {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                let comm = comm.trim().to_string();
                if Server::of(&comm).is_some() {
                    return None;
                }
                Some((pid, (comm, procstat::process_ticks(pid)?)))
            })
            .collect();
        let load = procstat::load_average();
        Self { load, others }
    }

    /// The load now, and the three other processes that used the most CPU since `earlier`.
    pub fn since(&self, earlier: &Machine) -> String {
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        let mut busy: Vec<(u64, &str)> = self
            .others
            .iter()
            .map(|(pid, (comm, t))| {
                let before = earlier.others.get(pid).map_or(0, |(_, b)| *b);
                (t.saturating_sub(before), comm.as_str())
            })
            .filter(|(t, _)| *t > 0)
            .collect();
        busy.sort_by_key(|b| std::cmp::Reverse(b.0));
        let top: Vec<String> = busy
            .into_iter()
            .take(3)
            .map(|(t, comm)| format!("{comm} {:.1} s", procstat::ticks_to_ms(t) / 1000.0))
            .collect();
        format!(
            "{cores} cores, load average {} (1, 5, 15 min); other processes' CPU meanwhile: {}",
            self.load,
            if top.is_empty() {
                "none".to_string()
            } else {
                top.join(", ")
            }
        )
    }

    /// The load average alone (for the start of a run).
    pub fn load(&self) -> &str {
        &self.load
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_processes_are_told_apart_by_command_name() {
        assert_eq!(Server::of("postgres"), Some(Server::Postgres));
        assert_eq!(Server::of("postgres: walwriter"), Some(Server::Postgres));
        assert_eq!(Server::of("beam.smp"), Some(Server::RabbitMq));
        assert_eq!(Server::of("redis-server"), Some(Server::Redis));
        assert_eq!(Server::of("hermes"), None);
        assert_eq!(Server::of("cargo"), None);
    }

    #[test]
    fn a_metric_is_summed_over_its_series_and_no_other() {
        let text = "# HELP hermes_bus_published_total Messages published.\n\
                    # TYPE hermes_bus_published_total counter\n\
                    hermes_bus_published_total{queue=\"router\"} 10\n\
                    hermes_bus_published_total{queue=\"llm\"} 5\n\
                    hermes_bus_published_total_other 99\n\
                    hermes_bus_publish_duration_seconds_count 7\n";
        assert_eq!(sum_of(text, "hermes_bus_published_total"), 15.0);
        assert_eq!(
            sum_of(
                "hermes_bus_published_total 3\n",
                "hermes_bus_published_total"
            ),
            3.0
        );
        assert_eq!(sum_of("", "hermes_bus_published_total"), 0.0);
    }

    #[test]
    fn costs_per_answer_divide_the_difference_and_keep_a_missing_statement_count_missing() {
        let snap = |ticks: u64, tx: i64, wal: f64, statements, published| Snapshot {
            ticks: BTreeMap::from([(Server::Postgres, ticks), (Server::Redis, ticks / 2)]),
            pg: PgCounters {
                transactions: tx,
                rows_written: tx * 3,
                wal_bytes: wal,
                statements,
            },
            published,
            stream_reads: published / 2.0,
        };
        let per = PerAnswer::between(
            &snap(100, 1_000, 5_000.0, Some(10), 40.0),
            &snap(300, 1_400, 45_000.0, Some(1_210), 340.0),
            100,
        );
        assert_eq!(
            per.cpu_ms,
            vec![
                (Server::Postgres, 20.0),
                (Server::RabbitMq, 0.0),
                (Server::Redis, 10.0)
            ]
        );
        assert_eq!(per.transactions, 4.0);
        assert_eq!(per.rows_written, 12.0);
        assert_eq!(per.wal_bytes, 400.0);
        assert_eq!(per.statements, Some(12.0));
        assert_eq!(per.publishes, 3.0);
        assert_eq!(per.stream_reads, 1.5);
        let without = PerAnswer::between(
            &snap(0, 0, 0.0, None, 0.0),
            &snap(0, 0, 0.0, Some(5), 0.0),
            1,
        );
        assert_eq!(without.statements, None);
    }
}
