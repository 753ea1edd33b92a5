//! `hermes bench fleet`: the whole path a user feels (an API call in, its answer out)
//! measured through the fleet running as separate processes, against a zero-latency fake
//! model on loopback. For each kind of request it searches the throughput frontier (the
//! highest rate whose p99 stays under a bound with every request answered as itself), then
//! measures p50/p99/p99.9 at half of it, with the CPU time and memory of every process per
//! answer. Kinds alternate round by round, so the machine's drift touches each alike, and
//! each figure is the median of the rounds (docs/performance.md). Every step keeps a ledger:
//! a request lost or answered with another's text voids the run (exit non-zero).

mod infra;
mod load;
mod telegram;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use hermes_bus::{Bus, Names};
use hermes_config::{Config, Namespace};
use hermes_db::scratch::ScratchDb;
use hermes_telemetry::Metrics;
use secrecy::ExposeSecret;

use crate::bench_faults::{fleet, model};
use crate::bench_stats::median;
use crate::procstat;
pub(crate) use load::read_sse;
use load::{Figures, Kind};

#[derive(Args, Debug)]
pub struct FleetBench {
    /// Kinds of request to measure (alternated round by round).
    #[arg(long = "kind", value_enum, value_delimiter = ',', default_values_t = [Kind::Chat, Kind::ChatStream, Kind::Responses, Kind::Runs, Kind::Telegram])]
    kinds: Vec<Kind>,
    /// Measure at this rate (requests/s) only, with no frontier search: the ledger check of
    /// scripts/test, or a point of your choice.
    #[arg(long)]
    rate: Option<f64>,
    /// Seconds of load at the measured rate (half the frontier, or `--rate`).
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Rounds: each kind's frontier and measurement is taken this many times, alternated.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The frontier search starts here (requests/s) and doubles while the bound holds.
    #[arg(long, default_value_t = 25.0)]
    start_rate: f64,
    /// The frontier search never goes above this rate.
    #[arg(long, default_value_t = 4000.0)]
    max_rate: f64,
    /// Seconds of load per step of the frontier search.
    #[arg(long, default_value_t = 4.0)]
    step_secs: f64,
    /// The p99 bound of the frontier, in milliseconds (from each request's scheduled time).
    #[arg(long, default_value_t = 250)]
    p99_bound_ms: u64,
    /// Processes of the fleet, one each, in start order.
    #[arg(long, value_delimiter = ',', default_values_t = ["ingest".to_string(), "router".into(), "llm".into(), "tools".into(), "delivery".into()])]
    services: Vec<String>,
}

/// A request not answered in this long is lost (the fleet's own run timeout is shorter).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// The fleet's queues expire this long after the run if it could not delete them.
const QUEUE_EXPIRES_SECS: u64 = 600;
/// What `--services` may name.
const SERVICES: [&str; 6] = ["ingest", "router", "llm", "tools", "delivery", "all"];
/// Halving steps of the frontier search once the bound broke.
const BISECTIONS: usize = 3;

pub async fn fleet(config: Config, args: FleetBench) -> anyhow::Result<()> {
    let id = &uuid::Uuid::now_v7().simple().to_string()[20..];
    let ns = format!("bench{id}");
    let logs = std::env::temp_dir().join(format!("hermes-{ns}"));
    std::fs::create_dir_all(&logs)?;
    let scratch = ScratchDb::create(&config.database_url, "hermes_bench").await?;
    eprintln!(
        "bench fleet: database {}, namespace {ns}, logs in {}",
        scratch.name(),
        logs.display()
    );
    let result = tokio::select! {
        r = run(&config, &args, &ns, &scratch, &logs) => r,
        signal = crate::bench_faults::interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
    };
    if let Err(e) = scratch.drop_now().await {
        eprintln!("bench fleet: could not drop the scratch database: {e}");
    }
    let names = Names::new(Namespace::parse(&ns).map_err(anyhow::Error::msg)?);
    let mut settings = config.bus.clone();
    settings.queue_expires = Some(Duration::from_secs(QUEUE_EXPIRES_SECS));
    match Bus::connect(config.amqp_url.clone(), names, settings, Metrics::new()).await {
        Ok(bus) => {
            if let Err(e) = bus.delete_topology().await {
                eprintln!(
                    "bench fleet: cannot delete the run's queues (they expire in {QUEUE_EXPIRES_SECS} s): {e}"
                );
            }
            bus.close().await;
        }
        Err(e) => eprintln!("bench fleet: cannot reach the broker to delete the run's queues: {e}"),
    }
    result
}

async fn run(
    config: &Config,
    args: &FleetBench,
    ns: &str,
    scratch: &ScratchDb,
    logs: &std::path::Path,
) -> anyhow::Result<()> {
    let calls = Arc::new(model::Calls::default());
    let model_url = model::serve(calls).await?;
    let channel = Arc::new(telegram::Channel::default());
    let telegram_url = telegram::serve(channel.clone()).await?;
    crate::bench_faults::seed_users(&scratch.db, telegram::USERS, config).await?;
    let http = fleet::free_port()?;
    let env: Vec<(String, String)> = [
        ("DATABASE_URL", scratch.url.expose_secret()),
        ("REDIS_URL", config.redis_url.expose_secret()),
        ("AMQP_URL", config.amqp_url.expose_secret()),
        ("HERMES_NAMESPACE", ns),
        ("HERMES_PROVIDER", "openai"),
        ("OPENAI_API_KEY", model::KEY),
        ("OPENAI_BASE_URL", model_url.as_str()),
        ("API_SERVER_KEY", load::API_KEY),
        ("TELEGRAM_WEBHOOK_SECRET", telegram::SECRET),
        ("TELEGRAM_BOT_TOKEN", telegram::TOKEN),
        ("TELEGRAM_API_BASE_URL", telegram_url.as_str()),
        // The fake Bot API has no flood limit, and each linked user sends about once a
        // second at the frontier: what is measured is the fleet, not the pacing.
        ("HERMES_DELIVERY_BOT_PER_SEC", "100000"),
        ("HERMES_INBOUND_PER_MINUTE", "100000"),
        ("HERMES_INBOUND_BURST", "100000"),
        ("HERMES_HTTP_ADDR", &format!("127.0.0.1:{http}")),
        ("HERMES_QUEUE_EXPIRES_SECS", &QUEUE_EXPIRES_SECS.to_string()),
        ("HERMES_LOG_FORMAT", "json"),
        ("RUST_LOG", "warn"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let services = args
        .services
        .iter()
        .map(|s| {
            SERVICES
                .iter()
                .find(|k| **k == s.as_str())
                .copied()
                .ok_or_else(|| anyhow::anyhow!("--services: {s:?} is not one of {SERVICES:?}"))
        })
        .collect::<anyhow::Result<Vec<&'static str>>>()?;
    eprintln!("bench fleet: starting {services:?}");
    let mut fleet = fleet::Fleet::start(&services, env, logs).await?;
    let base = format!("http://127.0.0.1:{http}");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .build()?;
    let target = load::Target {
        client: client.clone(),
        base: base.clone(),
        telegram: channel.clone(),
    };
    let bound = Duration::from_millis(args.p99_bound_ms);
    let fleet_pids = || fleet.pids().into_iter().map(|(_, p)| p).collect::<Vec<_>>();
    let machine = infra::Machine::now(&fleet_pids());
    println!(
        "machine at the start: load average {} (1, 5, 15 min)",
        machine.load()
    );
    let mut results: BTreeMap<&'static str, Vec<Round>> = BTreeMap::new();
    let mut void = Vec::new();
    for round in 0..args.rounds.max(1) {
        for &kind in &args.kinds {
            let tag = format!("r{round}-{}", kind.name());
            let frontier = match args.rate {
                Some(_) => None,
                None => Some(frontier(&target, kind, args, bound, &tag, &mut void).await),
            };
            let rate = args
                .rate
                .unwrap_or_else(|| (frontier.unwrap_or(args.start_rate) / 2.0).max(1.0));
            let before = costs(&fleet);
            let infra_before =
                infra::Snapshot::take(&scratch.db, &client, &fleet.admin_ports()).await?;
            let samples = load::step(
                &target,
                kind,
                rate,
                args.duration,
                &format!("{tag}-measure"),
                REQUEST_TIMEOUT,
            )
            .await;
            let after = costs(&fleet);
            let infra_after =
                infra::Snapshot::take(&scratch.db, &client, &fleet.admin_ports()).await?;
            let figures = Figures::of(&samples);
            let doubled = channel.take_doubled();
            if !figures.adds_up() || doubled > 0 {
                void.push(format!(
                    "{tag} at {rate:.0}/s: {figures:?}, {doubled} Telegram answers doubled"
                ));
            }
            let line = Round {
                frontier,
                rate,
                figures,
                per_process: per_answer(&before, &after, figures.answered),
                infra: infra::PerAnswer::between(&infra_before, &infra_after, figures.answered),
            };
            eprintln!("bench fleet: {tag}: {}", line.summary());
            results.entry(kind.name()).or_default().push(line);
        }
    }
    println!(
        "machine at the end: {}",
        infra::Machine::now(&fleet_pids()).since(&machine)
    );
    fleet.stop_all().await;
    // A doubled answer that came after its step ended still voids the run.
    let late = channel.take_doubled();
    if late > 0 {
        void.push(format!("{late} Telegram answers doubled after their step"));
    }
    report(&results);
    if !void.is_empty() {
        anyhow::bail!(
            "the ledger does not add up, the run is void: {}",
            void.join("; ")
        );
    }
    println!("bench fleet: the ledger adds up");
    Ok(())
}

/// The highest rate whose step answered every request as itself with p99 under `bound`:
/// doubled from `--start-rate` until the bound breaks, then bisected.
async fn frontier(
    target: &load::Target,
    kind: Kind,
    args: &FleetBench,
    bound: Duration,
    tag: &str,
    void: &mut Vec<String>,
) -> f64 {
    let mut search = crate::bench_stats::Frontier::new(args.start_rate, args.max_rate, BISECTIONS);
    for n in 0.. {
        let rate = search.rate();
        let samples = load::step(
            target,
            kind,
            rate,
            args.step_secs,
            &format!("{tag}-f{n}"),
            REQUEST_TIMEOUT,
        )
        .await;
        let f = Figures::of(&samples);
        let doubled = target.telegram.take_doubled();
        if !f.adds_up() || doubled > 0 {
            void.push(format!(
                "{tag} search at {rate:.0}/s: {f:?}, {doubled} Telegram answers doubled"
            ));
        }
        let holds = f.clean() && f.p99 <= bound;
        eprintln!(
            "bench fleet: {tag} {rate:.0}/s: p99 {} ms, {}/{} answered{}",
            f.p99.as_millis(),
            f.answered,
            f.sent,
            if holds { "" } else { " (bound broken)" }
        );
        if !search.record(holds) {
            break;
        }
        // Let the backlog of a broken step drain before the next.
        if !holds {
            settle(target).await;
        }
    }
    search.result()
}

/// Wait until the fleet answers one request quickly again (a broken step leaves a backlog).
async fn settle(target: &load::Target) {
    for _ in 0..60 {
        let samples = load::step(target, Kind::Chat, 1.0, 1.0, "settle", REQUEST_TIMEOUT).await;
        if samples
            .iter()
            .all(|s| s.latency < Duration::from_millis(100))
        {
            return;
        }
    }
}

/// One kind's figures in one round.
struct Round {
    frontier: Option<f64>,
    rate: f64,
    figures: Figures,
    /// CPU milliseconds per answer and RSS (KiB) at the end, per service.
    per_process: Vec<(&'static str, f64, u64)>,
    /// What PostgreSQL, RabbitMQ and Redis spent per answer.
    infra: infra::PerAnswer,
}

impl Round {
    fn summary(&self) -> String {
        let f = &self.figures;
        format!(
            "frontier {}, at {:.0}/s: {}/{} answered, p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms",
            self.frontier
                .map_or("-".to_string(), |r| format!("{r:.0}/s")),
            self.rate,
            f.answered,
            f.sent,
            ms(f.p50),
            ms(f.p99),
            ms(f.p999)
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Every process's CPU time and memory now.
fn costs(fleet: &fleet::Fleet) -> Vec<(&'static str, procstat::Reading)> {
    fleet
        .pids()
        .into_iter()
        .filter_map(|(service, pid)| Some((service, procstat::read(pid)?)))
        .collect()
}

/// CPU milliseconds per answer between two readings, and memory at the second, per process.
fn per_answer(
    before: &[(&'static str, procstat::Reading)],
    after: &[(&'static str, procstat::Reading)],
    answers: usize,
) -> Vec<(&'static str, f64, u64)> {
    after
        .iter()
        .zip(before)
        .map(|((service, a), (_, b))| {
            let cpu = a.cpu.saturating_sub(b.cpu).as_secs_f64() * 1000.0;
            (*service, cpu / answers.max(1) as f64, a.rss_kib)
        })
        .collect()
}

/// Print each kind's medians over the rounds, then the cost per process.
fn report(results: &BTreeMap<&'static str, Vec<Round>>) {
    println!(
        "{:<12} {:>7} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "kind", "rounds", "frontier/s", "rate/s", "p50 ms", "p99 ms", "p99.9 ms"
    );
    for (kind, rounds) in results {
        let m = |f: &dyn Fn(&Round) -> f64| median(rounds.iter().map(f).collect());
        let frontier = if rounds.iter().any(|r| r.frontier.is_some()) {
            format!("{:.0}", m(&|r| r.frontier.unwrap_or(0.0)))
        } else {
            "-".into()
        };
        println!(
            "{:<12} {:>7} {:>12} {:>10.0} {:>10.1} {:>10.1} {:>10.1}",
            kind,
            rounds.len(),
            frontier,
            m(&|r| r.rate),
            m(&|r| ms(r.figures.p50)),
            m(&|r| ms(r.figures.p99)),
            m(&|r| ms(r.figures.p999)),
        );
    }
    println!("CPU ms per answer (median over rounds) and RSS at the end, per process:");
    for (kind, rounds) in results {
        let Some(last) = rounds.last() else { continue };
        let cells: Vec<String> = last
            .per_process
            .iter()
            .enumerate()
            .map(|(i, (service, _, rss))| {
                let cpu = median(
                    rounds
                        .iter()
                        .filter_map(|r| r.per_process.get(i))
                        .map(|p| p.1)
                        .collect(),
                );
                format!("{service} {cpu:.2} ms {:.1} MiB", *rss as f64 / 1024.0)
            })
            .collect();
        println!("  {kind:<12} {}", cells.join(", "));
    }
    report_infra(results);
}

/// Print what the infrastructure spent per answer, each figure the median over the rounds.
fn report_infra(results: &BTreeMap<&'static str, Vec<Round>>) {
    println!(
        "Infrastructure per answer (median over rounds; the servers' CPU and WAL include \
         anything else they served meanwhile):"
    );
    for (kind, rounds) in results {
        let m = |f: &dyn Fn(&infra::PerAnswer) -> f64| {
            median(rounds.iter().map(|r| f(&r.infra)).collect())
        };
        let cpu: Vec<String> = rounds
            .first()
            .map(|r| r.infra.cpu_ms.iter().map(|(s, _)| *s).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, server)| {
                let v = m(&|p| p.cpu_ms.get(i).map_or(0.0, |c| c.1));
                format!("{} {v:.2} ms", server.name())
            })
            .collect();
        let statements = if rounds.iter().all(|r| r.infra.statements.is_some()) {
            format!("{:.1}", m(&|p| p.statements.unwrap_or(0.0)))
        } else {
            "n/a (pg_stat_statements not loaded)".into()
        };
        println!(
            "  {kind:<12} CPU {}; PostgreSQL {:.1} transactions, {statements} statements, \
             {:.1} rows written, {:.0} WAL bytes; {:.1} broker publishes",
            cpu.join(", "),
            m(&|p| p.transactions),
            m(&|p| p.rows_written),
            m(&|p| p.wal_bytes),
            m(&|p| p.publishes),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_per_answer_divides_the_difference_of_two_readings() {
        let r = |cpu_ms, rss_kib| procstat::Reading {
            cpu: Duration::from_millis(cpu_ms),
            rss_kib,
            peak_kib: rss_kib,
        };
        let before = vec![("ingest", r(1000, 10)), ("router", r(500, 10))];
        let after = vec![("ingest", r(1500, 20)), ("router", r(700, 30))];
        let per = per_answer(&before, &after, 100);
        assert_eq!(per, vec![("ingest", 5.0, 20), ("router", 2.0, 30)]);
    }
}
