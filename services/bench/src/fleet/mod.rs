//! `hermes bench fleet`: the whole path a user feels (an API call in, its answer out)
//! measured through the fleet running as separate processes, against a zero-latency fake
//! model on loopback. For each kind of request it searches the throughput frontier (the
//! highest rate whose p99 stays under a bound with every request answered as itself), then
//! measures p50/p99/p99.9 at half of it, with the CPU time and memory of every process per
//! answer. Kinds alternate round by round, so the machine's drift touches each alike, and
//! each figure is the median of the rounds (docs/performance.md). Every step keeps a ledger:
//! a request lost or answered with another's text voids the run (exit non-zero). With
//! `--with-floor` the floor (`hermes bench floor`: the same infrastructure work with no
//! Hermes logic) takes its turn in every round, and the report gives the fleet's figures as
//! ratios to the floor's. With `--tracing off,10,100` a fleet per tracing setting takes its
//! turn for every kind, and the report gives each traced fleet's figures as ratios to the
//! untraced one's (`tracing.rs`).

pub(crate) mod infra;
pub(crate) mod load;
mod report;
pub(crate) use report::report;
mod ledger;
pub(crate) mod search;
mod soak;
mod tracing;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use hermes_config::Config;
use hermes_db::scratch::ScratchDb;
use secrecy::ExposeSecret;

use crate::faults::model;
use crate::fleet_process::{Fleet, free_port};
use crate::platforms::Fakes;
use crate::procstat;
use load::{Figures, Kind, Requests};
use search::{REQUEST_TIMEOUT, SearchArgs, ms};

#[derive(Args, Debug)]
pub struct FleetBench {
    /// Kinds of request to measure (alternated round by round).
    #[arg(long = "kind", value_enum, value_delimiter = ',', default_values_t = [Kind::Chat, Kind::ChatStream, Kind::Responses, Kind::Runs, Kind::Telegram])]
    kinds: Vec<Kind>,
    #[command(flatten)]
    search: SearchArgs,
    /// Processes of the fleet, one each, in start order.
    #[arg(long, value_delimiter = ',', default_values_t = ["ingest".to_string(), "router".into(), "llm".into(), "tools".into(), "delivery".into()])]
    services: Vec<String>,
    /// Also measure the floor (`hermes bench floor`) in every round, alternated with the
    /// fleet's kinds, and print the fleet's figures as ratios to the floor's.
    #[arg(long)]
    with_floor: bool,
    /// Tracing settings (`off`, or a sampling percentage 1–100), a fleet each, taking turns
    /// for every kind; the report compares each with `off` (docs/performance.md, "Tracing's
    /// cost"). Without it the one fleet runs as configured.
    #[arg(long, value_delimiter = ',')]
    tracing: Vec<tracing::Setting>,
    /// Milliseconds between two span exports of a traced fleet (`OTEL_BSP_SCHEDULE_DELAY`;
    /// 5000, the fleet's own default). Every reading waits a little longer than this for the
    /// exports of the step just ended, so a shorter one makes a brief run briefer.
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    export_delay_ms: u64,
    /// Instead of the frontier table: a soak of this many minutes (fractions accepted) at
    /// `--rate`, or half the frontier, the `--kind`s taking turns step by step; it reports each
    /// process's idle memory and its growth (docs/performance.md, "Memory: the soak").
    #[arg(long, value_name = "MINUTES")]
    soak: Option<f64>,
    /// Seconds of each step of a soak (each step has its own ledger and memory sample).
    #[arg(long, default_value_t = 60.0)]
    soak_step_secs: f64,
}

/// The fleet's queues expire this long after the run if it could not delete them.
const QUEUE_EXPIRES_SECS: u64 = 600;
/// What `--services` may name.
const SERVICES: [&str; 6] = ["ingest", "router", "llm", "tools", "delivery", "all"];
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
        signal = crate::interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
    };
    if let Err(e) = scratch.drop_now().await {
        eprintln!("bench fleet: could not drop the scratch database: {e}");
    }
    delete_queues(&config, &ns).await;
    for i in 1..args.tracing.len() {
        delete_queues(&config, &tracing::namespace(&ns, i)).await;
    }
    result
}

/// Delete namespace `ns`'s queues (declared to expire, should that fail) and Redis keys.
pub(crate) async fn delete_queues(config: &Config, ns: &str) {
    let mut settings = config.bus.clone();
    settings.queue_expires = Some(Duration::from_secs(QUEUE_EXPIRES_SECS));
    let _ = crate::delete_namespace("bench fleet", config, ns, settings).await;
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
    let channel = Arc::new(ledger::Chats::default());
    let fakes = Arc::new(Fakes::serve(channel.clone(), logs).await?);
    crate::seed::users(&scratch.db, load::USERS, config).await?;
    let http = free_port()?;
    // One fleet's environment: each fleet of `--tracing` has its own database, namespace
    // and HTTP port, and shares the fake model and platform APIs.
    let env_of = |db_url: &str, ns: &str, http: u16| -> Vec<(String, String)> {
        let ingest = format!("http://127.0.0.1:{http}");
        [
            ("DATABASE_URL", db_url),
            ("REDIS_URL", config.redis_url.expose_secret()),
            ("AMQP_URL", config.amqp_url.expose_secret()),
            ("HERMES_NAMESPACE", ns),
            ("HERMES_PROVIDER", "openai"),
            ("OPENAI_API_KEY", model::KEY),
            ("OPENAI_BASE_URL", model_url.as_str()),
            ("API_SERVER_KEY", load::API_KEY),
            ("HERMES_INBOUND_PER_MINUTE", "100000"),
            ("HERMES_INBOUND_BURST", "100000"),
            ("HERMES_HTTP_ADDR", &format!("127.0.0.1:{http}")),
            ("HERMES_QUEUE_EXPIRES_SECS", &QUEUE_EXPIRES_SECS.to_string()),
            ("HERMES_LOG_FORMAT", "json"),
            ("RUST_LOG", "warn"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain(
            fakes
                .env(&ingest)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v)),
        )
        .collect()
    };
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
    if !args.tracing.is_empty() {
        if args.soak.is_some() {
            anyhow::bail!("--tracing compares frontiers; it does not go with --soak");
        }
        if let Some(var) = tracing::INHERITED
            .iter()
            .find(|v| std::env::var_os(v).is_some())
        {
            anyhow::bail!("--tracing sets each fleet's own endpoint: unset {var}");
        }
    }
    // The main fleet takes the first tracing setting; the others get fleets of their own.
    let export_delay = Duration::from_millis(args.export_delay_ms);
    let main_setting = args.tracing.first().copied();
    let (sink, tracing_env) = match main_setting {
        Some(setting) => tracing::main_fleet(setting, export_delay).await?,
        None => (None, Vec::new()),
    };
    let mut env = env_of(scratch.url.expose_secret(), ns, http);
    env.extend(tracing_env);
    eprintln!("bench fleet: starting {services:?}");
    let mut fleet = Fleet::start(&services, env, logs).await?;
    // Ingest hangs up a connection that brings no request within HERMES_HTTP_HEADER_TIMEOUT_SECS
    // (10 s by default, idle keep-alive included). A pooled connection taken just as ingest
    // closes it fails before its request is read, which the ledger would count as a loss
    // (it once did, at a step needing more connections than the two before it). Idle ones
    // are dropped well before, as HTTP clients commonly do (httpx after 5 s, undici 4 s).
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .pool_idle_timeout(Duration::from_secs(5))
        .build()?;
    let target_of = |base: String| load::Target {
        client: client.clone(),
        base,
        chats: channel.clone(),
        fakes: fakes.clone(),
    };
    let target = target_of(format!("http://127.0.0.1:{http}"));
    if let Some(minutes) = args.soak {
        return soak::run(&target, &mut fleet, args, minutes).await;
    }
    let others = tracing::start_others(
        config,
        &args.tracing,
        ns,
        &services,
        &env_of,
        logs,
        export_delay,
    )
    .await?;
    let floor = match args.with_floor {
        true => match crate::floor::Standalone::start(config, &format!("{ns}f")).await {
            Ok(floor) => Some(floor),
            Err(e) => {
                tracing::finish(config, others).await;
                return Err(e);
            }
        },
        false => None,
    };
    let fleet = tokio::sync::Mutex::new(fleet);
    let mut subjects = vec![Subject {
        setting: main_setting,
        target: target.clone(),
        fleet: &fleet,
        db: &scratch.db,
        sink: sink.as_ref(),
    }];
    subjects.extend(others.iter().map(|o| Subject {
        setting: Some(o.setting),
        target: target_of(o.base.clone()),
        fleet: &o.fleet,
        db: &o.scratch.db,
        sink: o.sink.as_ref(),
    }));
    let fleet_pids = || {
        subjects
            .iter()
            .filter_map(|s| s.fleet.try_lock().ok())
            .flat_map(|f| f.pids().into_iter().map(|(_, p)| p))
            .collect::<Vec<_>>()
    };
    let machine = infra::Machine::now(&fleet_pids());
    println!(
        "machine at the start: load average {} (1, 5, 15 min)",
        machine.load()
    );
    let mut results: BTreeMap<String, Vec<Round>> = BTreeMap::new();
    let mut void = Vec::new();
    let no_doubles = || 0;
    let doubles = || channel.take_doubled();
    // Compared fleets take turns alone: three fleets' pools outgrow PostgreSQL's default 100
    // connections, and a refused process holds its messages (docs/performance.md, "Tracing's cost").
    let alone = subjects.len() > 1;
    if alone {
        for subject in &subjects {
            subject.fleet.lock().await.stop_all().await;
        }
    }
    let outcome: anyhow::Result<()> = async {
        for round in 0..args.search.rounds.max(1) {
            for &kind in &args.kinds {
                // A kind's settings run back to back, so they share the round's drift; each
                // round starts with the next one, so that none always follows the same
                // setting (the machine's state after a heavy step carries into the next).
                for turn in 0..subjects.len() {
                    let subject = &subjects[in_turn(round, turn, subjects.len())];
                    let mut fleet = subject.fleet.lock().await;
                    if alone {
                        fleet.start_again().await?;
                    }
                    let requests: Arc<dyn Requests> = Arc::new(load::FleetRequests {
                        target: subject.target.clone(),
                        kind,
                    });
                    let meter = Meter::Fleet {
                        fleet: &fleet,
                        db: subject.db,
                        client: &client,
                        sink: subject.sink,
                        settle: subject.setting.map(|_| tracing::quiet(export_delay)),
                    };
                    let name = subject
                        .setting
                        .map_or_else(|| kind.name().to_string(), |s| s.label(kind.name()));
                    let tag = format!("r{round}-{name}");
                    let line =
                        measure(&requests, &meter, &args.search, &tag, &mut void, &doubles).await;
                    if alone {
                        fleet.stop_all().await;
                    }
                    results.entry(name).or_default().push(line?);
                }
            }
            if let Some(floor) = &floor {
                let requests: Arc<dyn Requests> = floor.floor.clone();
                let meter = Meter::Floor {
                    floor: &floor.floor,
                    db: &floor.scratch.db,
                    client: &client,
                };
                let tag = format!("r{round}-floor");
                let line = measure(
                    &requests,
                    &meter,
                    &args.search,
                    &tag,
                    &mut void,
                    &no_doubles,
                )
                .await?;
                results.entry(FLOOR.to_string()).or_default().push(line);
            }
        }
        Ok(())
    }
    .await;
    println!(
        "machine at the end: {}",
        infra::Machine::now(&fleet_pids()).since(&machine)
    );
    let spans: Vec<(tracing::Setting, u64)> = subjects
        .iter()
        .filter_map(|s| Some((s.setting?, s.sink?.spans())))
        .collect();
    drop(subjects);
    fleet.into_inner().stop_all().await;
    tracing::finish(config, others).await;
    if let Some(floor) = floor {
        floor.finish().await;
    }
    outcome?;
    // A doubled answer that came after its step ended still voids the run.
    let late = channel.take_doubled();
    report(&results);
    if args.with_floor {
        report::ratios(&results);
    }
    if !args.tracing.is_empty() {
        let kinds: Vec<&str> = args.kinds.iter().map(|k| k.name()).collect();
        tracing::report(&results, &kinds, &args.tracing);
        for (setting, spans) in spans {
            println!("spans received in the whole run with tracing {setting}: {spans}");
        }
    }
    load::close_ledger(late, void)
}

/// One fleet the rounds measure: the main one, or one of another tracing setting.
struct Subject<'a> {
    /// Its tracing setting, when `--tracing` is given.
    setting: Option<tracing::Setting>,
    target: load::Target,
    fleet: &'a tokio::sync::Mutex<Fleet>,
    db: &'a hermes_db::Db,
    sink: Option<&'a tracing::Sink>,
}

/// The name the floor's figures are reported under.
pub(crate) const FLOOR: &str = "floor";

/// Where a measurement reads its costs: the fleet's processes and their admin ports, or the
/// floor in this process.
pub(crate) enum Meter<'a> {
    Fleet {
        fleet: &'a Fleet,
        db: &'a hermes_db::Db,
        client: &'a reqwest::Client,
        /// Where it exports its spans, when traced.
        sink: Option<&'a tracing::Sink>,
        /// In a tracing comparison: an untraced fleet is read after the same quiet time a
        /// traced one waits for its exports, so both readings span the same idle time and
        /// its background work (timers, sweeps, probes) weighs the same on each answer.
        settle: Option<Duration>,
    },
    Floor {
        floor: &'a crate::floor::Floor,
        db: &'a hermes_db::Db,
        client: &'a reqwest::Client,
    },
}

impl Meter<'_> {
    /// What a traced fleet has exported (read first: it waits for the exports of the step
    /// just ended), every process's CPU time and memory, and the infrastructure's counters.
    async fn read(&self) -> anyhow::Result<Reading> {
        match self {
            Meter::Fleet {
                fleet,
                db,
                client,
                sink,
                settle,
            } => {
                let exported = match sink {
                    Some(sink) => Some(sink.reading(client, &fleet.admin_ports()).await),
                    None => {
                        if let Some(quiet) = settle {
                            tokio::time::sleep(*quiet).await;
                        }
                        None
                    }
                };
                let procs = fleet
                    .pids()
                    .into_iter()
                    .filter_map(|(service, pid)| Some((service, procstat::read(pid)?)))
                    .collect();
                let snapshot = infra::Snapshot::take(db, client, &fleet.admin_ports(), 0.0).await?;
                Ok((procs, snapshot, exported))
            }
            Meter::Floor { floor, db, client } => {
                let procs = procstat::read(std::process::id())
                    .map(|r| ("floor (this process, the load included)", r))
                    .into_iter()
                    .collect();
                let snapshot = infra::Snapshot::take(db, client, &[], floor.published()).await?;
                Ok((procs, snapshot, None))
            }
        }
    }
}

/// Every process's CPU and memory, the infrastructure's counters and a traced fleet's exports.
type Reading = (
    Vec<(&'static str, procstat::Reading)>,
    infra::Snapshot,
    Option<tracing::Exported>,
);

/// One round of one subject: its frontier (unless `--rate`), a measurement at half of it
/// (or at `--rate`) with its costs, and `--serial` requests one at a time.
pub(crate) async fn measure(
    requests: &Arc<dyn Requests>,
    meter: &Meter<'_>,
    args: &SearchArgs,
    tag: &str,
    void: &mut Vec<String>,
    doubled: &(dyn Fn() -> usize + Sync),
) -> anyhow::Result<Round> {
    let frontier = match args.rate {
        Some(_) => None,
        None => Some(search::frontier(requests, args, tag, void, doubled).await),
    };
    let rate = args
        .rate
        .unwrap_or_else(|| (frontier.unwrap_or(args.start_rate) / 2.0).max(1.0));
    let (procs_before, infra_before, exported_before) = meter.read().await?;
    let samples = load::step(
        requests,
        rate,
        args.duration,
        &format!("{tag}-measure"),
        REQUEST_TIMEOUT,
    )
    .await;
    let (procs_after, infra_after, exported_after) = meter.read().await?;
    let figures = Figures::of(&samples);
    let twice = doubled();
    if !figures.adds_up() || twice > 0 {
        void.push(format!(
            "{tag} at {rate:.0}/s: {figures:?}, {twice} answers doubled"
        ));
    }
    let serial = match args.serial {
        0 => None,
        n => {
            let samples =
                load::serial(requests, n, &format!("{tag}-serial"), REQUEST_TIMEOUT).await;
            let f = Figures::of(&samples);
            if !f.adds_up() || doubled() > 0 {
                void.push(format!("{tag} one at a time: {f:?}"));
            }
            Some(f.p50)
        }
    };
    let line = Round {
        frontier,
        rate,
        figures,
        serial_p50: serial,
        per_process: per_answer(&procs_before, &procs_after, figures.answered),
        infra: infra::PerAnswer::between(&infra_before, &infra_after, figures.answered),
        exported: exported_before
            .zip(exported_after)
            .map(|(b, a)| tracing::Exported::per_answer(&b, &a, figures.answered)),
    };
    eprintln!("bench: {tag}: {}", line.summary());
    Ok(line)
}

/// One subject's figures in one round.
pub(crate) struct Round {
    frontier: Option<f64>,
    rate: f64,
    figures: Figures,
    /// p50 of the requests sent one at a time.
    serial_p50: Option<Duration>,
    /// CPU milliseconds per answer and RSS (KiB) at the end, per process.
    per_process: Vec<(&'static str, f64, u64)>,
    /// What PostgreSQL, RabbitMQ and Redis spent per answer.
    infra: infra::PerAnswer,
    /// What a traced fleet exported per answer.
    exported: Option<tracing::Exported>,
}

impl Round {
    fn summary(&self) -> String {
        let f = &self.figures;
        format!(
            "frontier {}, at {:.0}/s: {}/{} answered, p50 {:.1} ms, p99 {:.1} ms, p99.9 {:.1} ms{}{}",
            self.frontier
                .map_or("-".to_string(), |r| format!("{r:.0}/s")),
            self.rate,
            f.answered,
            f.sent,
            ms(f.p50),
            ms(f.p99),
            ms(f.p999),
            self.serial_p50.map_or(String::new(), |p| format!(
                ", one at a time p50 {:.1} ms",
                ms(p)
            )),
            self.exported.map_or(String::new(), |e| format!(
                ", {:.1} spans and {:.0} bytes exported per answer",
                e.spans, e.bytes
            ))
        )
    }
}

/// Which of `n` compared fleets takes turn `turn` of round `round`: each round starts one
/// further on, so over `n` rounds each takes every place once.
fn in_turn(round: usize, turn: usize, n: usize) -> usize {
    (turn + round) % n
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_per_answer_divides_the_difference_of_two_readings() {
        let r = |cpu_ms, rss_kib| procstat::Reading {
            cpu: Duration::from_millis(cpu_ms),
            rss_kib,
            peak_kib: rss_kib,
            anon_kib: rss_kib,
        };
        let before = vec![("ingest", r(1000, 10)), ("router", r(500, 10))];
        let after = vec![("ingest", r(1500, 20)), ("router", r(700, 30))];
        let per = per_answer(&before, &after, 100);
        assert_eq!(per, vec![("ingest", 5.0, 20), ("router", 2.0, 30)]);
    }

    #[test]
    fn each_setting_takes_every_place_once_over_as_many_rounds() {
        let order = |round| {
            (0..3)
                .map(|turn| in_turn(round, turn, 3))
                .collect::<Vec<_>>()
        };
        assert_eq!(order(0), [0, 1, 2], "the first round keeps the given order");
        assert_eq!(order(1), [1, 2, 0]);
        for place in 0..3 {
            let mut at: Vec<usize> = (0..3).map(|r| order(r)[place]).collect();
            at.sort();
            assert_eq!(at, [0, 1, 2], "place {place}");
        }
        assert_eq!(in_turn(7, 0, 1), 0, "one fleet alone always goes");
    }
}
