//! `hermes bench faults`: the fleet as separate processes (ingest, two routers, two llm, tools,
//! two delivery), a ledgered Telegram load against a fake model and a fake Bot API, and
//! faults injected while it runs: `kill -9` and SIGTERM of random processes (restarted as
//! Kubernetes would), a rolling restart of every process in turn, and PostgreSQL, Redis or
//! RabbitMQ taken away for a while: either the machine's servers behind chaos proxies (cut and
//! refused, never stopped: others share them) or servers of the run's own, really stopped and
//! started again ([`servers`]), or, on clustered servers, one broker node or the PostgreSQL
//! primary at a time ([`cluster_faults`]). At the end the ledger must add up
//! (docs/faults.md), or the command exits non-zero.

mod api_load;
mod cluster;
mod cluster_faults;
mod killswitch;
mod ledger;
pub(crate) mod load;
pub(crate) mod model;
mod programs;
mod recovery;
mod servers;
mod steps;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, ValueEnum};
use hermes_bus::{Bus, Names};
use hermes_config::{Config, Namespace};
use hermes_db::scratch::ScratchDb;
use hermes_telemetry::Metrics;
use hermes_types::model::Platform;
use secrecy::{ExposeSecret, SecretString};

use crate::fleet_process::{Fleet, free_port};
use crate::platforms::Fakes;
use ledger::Ledger;
use load::Seen;
use servers::{Server, ServerMode, Servers, Urls};

/// A fault to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Fault {
    /// `kill -9` of a random process, restarted at once.
    Kill9,
    /// SIGTERM of a random process, restarted once it exited.
    Sigterm,
    /// A rolling restart: every process in turn stopped with SIGTERM and started again, the
    /// next one once the last is ready (as a Kubernetes rollout of every deployment).
    Rolling,
    /// PostgreSQL away for `--down-secs`.
    Postgres,
    /// Redis away for `--down-secs`, and empty when it comes back (no persistence).
    Redis,
    /// RabbitMQ away for `--down-secs`.
    Rabbitmq,
    /// `kill -9` of the broker node leading most stage queues, restarted after `--down-secs`
    /// (`--servers cluster`).
    RabbitLeader,
    /// `kill -9` of the broker node leading the fewest stage queues, restarted after
    /// `--down-secs` (`--servers cluster`).
    RabbitFollower,
    /// The broker nodes stopped and started one at a time, each once every queue keeps a
    /// majority without it, as an operator's upgrade does (`--servers cluster`).
    RollingCluster,
    /// The PostgreSQL primary stopped hard, its standby promoted, the address switched, and
    /// a new standby cloned (`--servers cluster`).
    PgFailover,
    /// As `pg-failover`, but the promoted primary stays `--down-secs` without a standby while
    /// it requires one: every commit waits (`--servers cluster`).
    PgNoStandby,
}

impl Fault {
    /// Whether the fault acts on clustered servers' nodes (and needs `--servers cluster`).
    fn is_clustered(self) -> bool {
        matches!(
            self,
            Self::RabbitLeader
                | Self::RabbitFollower
                | Self::RollingCluster
                | Self::PgFailover
                | Self::PgNoStandby
        )
    }
}

#[derive(Args, Debug)]
pub struct FaultsBench {
    /// Faults to inject, spread over the load (repeat the flag, or give a list).
    #[arg(long = "fault", value_enum, value_delimiter = ',', default_values_t = [Fault::Kill9, Fault::Sigterm])]
    faults: Vec<Fault>,
    /// Injections of each fault.
    #[arg(long, default_value_t = 2)]
    count: usize,
    /// Messages in the run.
    #[arg(long, default_value_t = 1_000)]
    messages: usize,
    /// Messages sent per second (open loop).
    #[arg(long, default_value_t = 40.0)]
    rate: f64,
    /// Linked users the messages come from.
    #[arg(long, default_value_t = 50)]
    users: usize,
    /// The chat platforms the linked users' messages come over, in turn.
    #[arg(long = "channels", value_delimiter = ',', value_parser = chat_platform,
          default_value = "telegram,whatsapp,instagram,messenger,slack,discord,teams,sms")]
    channels: Vec<Platform>,
    /// Every this many messages, one goes through the OpenAI-compatible API as a streamed
    /// completion instead of a chat platform's webhook (0: none).
    #[arg(long, default_value_t = 10)]
    api_every: usize,
    /// Every this many messages, one comes from a user whose daily token budget is already
    /// spent: its answer must be the budget's refusal, through every fault (0: none).
    #[arg(long, default_value_t = 20)]
    capped_every: usize,
    /// How long a server stays away.
    #[arg(long, default_value_t = 20)]
    down_secs: u64,
    /// How long to wait after the load for every answer.
    #[arg(long, default_value_t = 180)]
    settle_secs: u64,
    /// Doubled sends allowed, in percent of the messages (a `kill -9` between a send and its
    /// record sends again: platforms take no idempotency key).
    #[arg(long, default_value_t = 0.1)]
    max_doubled_percent: f64,
    /// Where PostgreSQL, Redis and RabbitMQ come from: the machine's behind chaos proxies
    /// (taken away by cutting connections), or the run's own, really stopped and restarted.
    #[arg(long, value_enum, default_value_t = ServerMode::Proxy)]
    servers: ServerMode,
    /// The longest the whole run may take, servers started and cleaned up included: past it
    /// the run gives up, names the step it was at, and cleans up as after any failure.
    #[arg(long, default_value_t = 1_800)]
    deadline_secs: u64,
}

/// How long a fault's backlog may take to be answered before the run is reported stuck.
const RECOVERY_BOUND: u64 = 180;
/// The fleet's queues expire this long after the run if it could not delete them.
const QUEUE_EXPIRES_SECS: u64 = 900;
/// Queued retries come back within seconds, so a run settles quickly.
const RETRY_DELAYS: [u64; 5] = [1, 2, 5, 10, 30];

const SERVICES: [&str; 8] = [
    "ingest", "router", "router", "llm", "llm", "tools", "delivery", "delivery",
];
/// On clustered servers, two processes of every service (the ingest ones first: they get
/// addresses of their own behind one proxy).
const CLUSTER_SERVICES: [&str; 10] = [
    "ingest", "ingest", "router", "router", "llm", "llm", "tools", "tools", "delivery", "delivery",
];

pub async fn faults(config: Config, args: FaultsBench) -> anyhow::Result<()> {
    let cluster = args.servers == ServerMode::Cluster;
    for f in &args.faults {
        let whole_server = matches!(f, Fault::Postgres | Fault::Redis | Fault::Rabbitmq);
        if f.is_clustered() && !cluster {
            anyhow::bail!("--fault {f:?} needs --servers cluster");
        }
        if whole_server && cluster {
            anyhow::bail!("--fault {f:?}: {}", servers::CLUSTER_FAULTS);
        }
    }
    let id = &uuid::Uuid::now_v7().simple().to_string()[20..];
    let ns = format!("faults{id}");
    let dir = std::env::temp_dir().join(format!("hermes-{ns}"));
    std::fs::create_dir_all(&dir)?;
    let machine = Urls {
        postgres: config.database_url.expose_secret().to_string(),
        redis: config.redis_url.expose_secret().to_string(),
        amqp: config.amqp_url.expose_secret().to_string(),
    };
    match args.servers {
        ServerMode::Private => eprintln!(
            "faults: starting private PostgreSQL, Redis and RabbitMQ under {}",
            dir.display()
        ),
        ServerMode::Cluster => eprintln!(
            "faults: starting a 3-node RabbitMQ cluster and a PostgreSQL primary with a synchronous standby under {}",
            dir.display()
        ),
        ServerMode::Proxy => {}
    }
    // First: whatever ends this process, what it starts below dies with it.
    let reaper = crate::reaper::Reaper::start(&dir, &servers::DIRS.map(|d| dir.join(d)))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.deadline_secs);
    let gave_up = || {
        anyhow::anyhow!(
            "gave up after {} s (--deadline-secs); the last step: {}",
            args.deadline_secs,
            steps::last()
        )
    };
    let servers = tokio::time::timeout_at(deadline, Servers::start(args.servers, machine, &dir))
        .await
        .map_err(|_| gave_up())??;
    let server = SecretString::from(servers.urls.postgres.clone());
    let scratch = ScratchDb::create(&server, "hermes_faults").await?;
    eprintln!("faults: database {}, namespace {ns}", scratch.name());
    // Interrupted (Ctrl-C, SIGTERM), the run stops here: its processes are killed as the
    // fleet is dropped, and the database and private servers removed below.
    let result = tokio::select! {
        r = run(&config, &args, &ns, &scratch, &servers, &dir, reaper.group) => r,
        signal = crate::interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
        _ = tokio::time::sleep_until(deadline) => Err(gave_up()),
    };
    // Bounded: on servers of the run's own, a primary still waiting for its standby would hold
    // the drop for ever, and they are removed below anyway.
    match tokio::time::timeout(Duration::from_secs(30), scratch.drop_now()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("faults: could not drop the scratch database: {e}"),
        Err(_) => eprintln!("faults: the scratch database was not dropped within 30 s"),
    }
    // On the machine's servers, a run that failed or gave up before its own deletion leaves
    // its queues and Redis keys: deleted here (a second deletion after a whole run is a no-op).
    if args.servers == ServerMode::Proxy
        && let Err(e) = crate::delete_namespace("faults", &config, &ns, bus_settings(&config)).await
    {
        eprintln!("faults: cannot delete the namespace {ns} (its queues expire): {e}");
    }
    // Private servers stop here, also after a failed run.
    drop(servers);
    drop(reaper);
    result
}

async fn run(
    config: &Config,
    args: &FaultsBench,
    ns: &str,
    scratch: &ScratchDb,
    servers: &Servers,
    logs: &std::path::Path,
    group: u32,
) -> anyhow::Result<()> {
    crate::seed::users(&scratch.db, args.users, config).await?;
    let mix = load::Mix {
        users: args.users,
        platforms: args.channels.clone(),
        api_every: args.api_every,
        capped_every: args.capped_every,
    };
    let pg_url = servers.for_fleet(Server::Postgres, scratch.url.expose_secret())?;
    let redis_url = servers.for_fleet(Server::Redis, &servers.urls.redis)?;
    let amqp_url = servers.for_fleet(Server::Rabbitmq, &servers.urls.amqp)?;
    let seen = Arc::new(Seen::default());
    let fakes = Arc::new(Fakes::serve(seen.clone(), logs).await?);
    let calls = Arc::new(model::Calls::default());
    let model_url = model::serve(calls.clone()).await?;
    let http = free_port()?;
    let services: &[&'static str] = if servers.cluster().is_some() {
        &CLUSTER_SERVICES
    } else {
        &SERVICES
    };
    // On clustered servers two ingest processes listen on addresses of their own behind one
    // proxy, as a Service spreads the platform's calls over two pods.
    let ingests: Vec<u16> = services
        .iter()
        .filter(|s| **s == "ingest")
        .map(|_| free_port())
        .collect::<Result<_, _>>()?;
    let front = match servers.cluster() {
        Some(_) => {
            let to = ingests
                .iter()
                .map(|p| ([127, 0, 0, 1], *p).into())
                .collect();
            Some(hermes_net::chaos::ChaosProxy::balance(to).await)
        }
        None => None,
    };
    let own_http = |i: usize| match (&front, ingests.get(i)) {
        (Some(_), Some(port)) => vec![("HERMES_HTTP_ADDR".into(), format!("127.0.0.1:{port}"))],
        _ => Vec::new(),
    };
    // Where the platforms post (Twilio signs that URL).
    let public = front.as_ref().map_or(http, |f| f.addr.port());
    let retry_delays = RETRY_DELAYS.map(|s| s.to_string()).join(",");
    let env: Vec<(String, String)> = [
        ("DATABASE_URL", pg_url.as_str()),
        ("REDIS_URL", redis_url.as_str()),
        ("AMQP_URL", amqp_url.as_str()),
        ("HERMES_NAMESPACE", ns),
        ("HERMES_PROVIDER", "openai"),
        ("OPENAI_API_KEY", model::KEY),
        ("OPENAI_BASE_URL", model_url.as_str()),
        ("API_SERVER_KEY", api_load::API_KEY),
        ("HERMES_HTTP_ADDR", &format!("127.0.0.1:{http}")),
        ("HERMES_INBOUND_PER_MINUTE", "100000"),
        ("HERMES_INBOUND_BURST", "100000"),
        ("HERMES_QUEUE_EXPIRES_SECS", &QUEUE_EXPIRES_SECS.to_string()),
        ("HERMES_DELIVERY_RETRY_DELAYS", &retry_delays),
        ("HERMES_SEND_PAUSES_MS", "10,10,10"),
        // As the manifests give ingest (k8s/base/ingest.yaml): its callers' answers may wait
        // on a backlog.
        ("HERMES_SHUTDOWN_GRACE_SECS", "30"),
        // Eight processes share one server's `max_connections` (100 by default).
        ("HERMES_DB_POOL_SIZE", "8"),
        // The API callers wait through every fault, a stall of commits included, for up to
        // 180 s (api_load.rs): the runs must not time out first. Set here, so that a caller's
        // own setting (the test suite's 30 s) does not reach the fleet.
        ("HERMES_RUN_TIMEOUT_SECS", "180"),
        ("HERMES_LOG_FORMAT", "json"),
        // The bus's reconnects and re-subscriptions, to read a fault's recovery from the logs.
        ("RUST_LOG", "warn,hermes_bus=info"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .chain(
        fakes
            .env(&format!("http://127.0.0.1:{public}"))
            .into_iter()
            .map(|(k, v)| (k.to_string(), v)),
    )
    .collect();
    steps::step(&format!(
        "starting {} processes (logs in {})",
        services.len(),
        logs.display()
    ));
    let mut fleet = Fleet::start_each(services, env, logs, own_http, Some(group)).await?;
    if let Some(cluster) = servers.cluster() {
        eprintln!(
            "faults: {}",
            cluster_faults::check_members(cluster, ns).await?
        );
    }
    let load = tokio::spawn(load::run(
        format!("http://127.0.0.1:{public}"),
        args.messages,
        mix.clone(),
        args.rate,
        (seen.clone(), fakes),
    ));
    // On clustered servers, the load's progress every 2 s beside the faults' steps, to read a
    // recovery's shape (a stall, a backlog draining) against the servers' logs.
    let ticker = servers
        .cluster()
        .map(|_| tokio::spawn(cluster_faults::progress(seen.clone())));
    // Processes that exit on their own are restarted all along, as Kubernetes would.
    let mut revived = Vec::new();
    let injected = inject(args, &mut fleet, servers, ns, &seen, &mut revived).await;
    let mut poll = tokio::time::interval(Duration::from_millis(100));
    while !load.is_finished() {
        poll.tick().await;
        revived.extend(fleet.revive());
    }
    load.await?;
    if let Some(t) = ticker {
        t.abort();
    }
    steps::step(&format!(
        "load sent; waiting up to {} s for every answer",
        args.settle_secs
    ));
    let settled = recovery::settle(args, &seen, &scratch.db, &mut fleet, &mut revived).await;
    let names = Names::new(Namespace::parse(ns).map_err(anyhow::Error::msg)?);
    let settings = bus_settings(config);
    let amqp = SecretString::from(servers.urls.amqp.clone());
    steps::step("reading the ledger");
    // Connected only now: a connection made before a broker restart would be gone.
    let bus = Bus::connect(amqp, names, settings, Metrics::new()).await?;
    let mut ledger = Ledger::read(args.messages, &mix, &seen, &calls, &scratch.db, &bus).await?;
    if settled && args.faults.contains(&Fault::Redis) {
        let probe = killswitch::Probe {
            config,
            ns,
            db: &scratch.db,
            servers,
            seen: &seen,
            calls: &calls,
            webhook: format!("http://127.0.0.1:{public}/webhooks/telegram"),
            from: load::sender(0, args.users),
        };
        ledger.killswitch_held = Some(probe.run().await?);
    }
    steps::step("stopping the fleet");
    fleet.stop_all().await;
    if let Err(e) = bus.delete_topology().await {
        eprintln!(
            "faults: cannot delete the run's queues (they expire in {QUEUE_EXPIRES_SECS} s): {e}"
        );
    }
    bus.close().await;
    let recoveries = injected?;
    println!("faults: {}", ledger);
    for r in &recoveries {
        println!("  {r}");
    }
    for r in &revived {
        println!("  {r}");
    }
    let graceful = args
        .faults
        .iter()
        .all(|f| matches!(f, Fault::Sigterm | Fault::Rolling));
    let problems = ledger.problems(args.max_doubled_percent, graceful);
    if !settled || !problems.is_empty() {
        anyhow::bail!("the ledger does not add up: {}", problems.join("; "));
    }
    println!("faults: the ledger adds up");
    Ok(())
}

/// The fleet's bus settings exactly (the broker refuses a queue declared otherwise): the
/// machine's, with the run's queue expiry and short retry delays.
fn bus_settings(config: &Config) -> hermes_config::BusSettings {
    let mut settings = config.bus.clone();
    settings.queue_expires = Some(Duration::from_secs(QUEUE_EXPIRES_SECS));
    settings.retry_delays = RETRY_DELAYS
        .iter()
        .map(|s| Duration::from_secs(*s))
        .collect();
    settings
}

/// A `--channels` value: one of the chat platforms.
fn chat_platform(name: &str) -> Result<Platform, String> {
    Platform::parse(name)
        .filter(|p| p.is_chat())
        .ok_or_else(|| {
            format!(
                "not a chat platform (one of {:?})",
                crate::platforms::CHAT.map(|p| p.as_str())
            )
        })
}

/// Inject the faults, spread over the load by messages accepted; returns one line per fault
/// with its time to recover (from its end to the next answer).
async fn inject(
    args: &FaultsBench,
    fleet: &mut Fleet,
    servers: &Servers,
    ns: &str,
    seen: &Arc<Seen>,
    revived: &mut Vec<String>,
) -> anyhow::Result<Vec<String>> {
    let plan: Vec<Fault> = (0..args.count)
        .flat_map(|_| args.faults.iter().copied())
        .collect();
    let mut watchers = tokio::task::JoinSet::new();
    let mut poll = tokio::time::interval(Duration::from_millis(50));
    for (n, fault) in plan.iter().enumerate() {
        // Evenly over the load, by messages accepted.
        let at = args.messages * (n + 1) / (plan.len() + 1);
        steps::step(&format!("{fault:?} waits for message {at} to be taken"));
        while seen.taken() < at {
            poll.tick().await;
            revived.extend(fleet.revive());
        }
        // Recovered once every message accepted by the fault's moment has its answer; watched
        // beside the next faults, which keep to their schedule. A clustered fault is meant to
        // be served through, so its moment is the kill itself (told by the fault as it
        // happens); the others' is their end.
        let (moment, fault_at) = tokio::sync::oneshot::channel::<Instant>();
        let (said, what_rx) = tokio::sync::oneshot::channel::<(String, &'static str)>();
        watchers.spawn(recovery::watch(n, seen.clone(), fault_at, what_rx));
        let (what, moment) = match fault {
            Fault::RabbitLeader
            | Fault::RabbitFollower
            | Fault::RollingCluster
            | Fault::PgFailover
            | Fault::PgNoStandby => {
                let cluster = servers
                    .cluster()
                    .context("clustered faults need --servers cluster")?;
                let down = Duration::from_secs(args.down_secs);
                let what =
                    cluster_faults::inject(*fault, cluster, ns, down, fleet, revived, moment)
                        .await?;
                (what, None)
            }
            Fault::Kill9 | Fault::Sigterm => {
                let i = rand::random_range(0..fleet.procs.len());
                let service = fleet.procs[i].service;
                if *fault == Fault::Kill9 {
                    fleet.kill_and_restart(i).await?;
                    (format!("kill -9 of {service}"), Some(moment))
                } else {
                    let clean = fleet.stop_and_restart(i, Duration::from_secs(20)).await?;
                    (
                        format!("SIGTERM of {service} (clean exit: {clean})"),
                        Some(moment),
                    )
                }
            }
            Fault::Rolling => {
                let mut unclean = Vec::new();
                for i in 0..fleet.procs.len() {
                    if !fleet.stop_and_restart(i, Duration::from_secs(20)).await? {
                        unclean.push(fleet.procs[i].service);
                    }
                }
                let what = format!(
                    "rolling restart of all {} processes (unclean exits: {unclean:?})",
                    fleet.procs.len()
                );
                (what, Some(moment))
            }
            Fault::Postgres | Fault::Redis | Fault::Rabbitmq => {
                let server = match fault {
                    Fault::Postgres => Server::Postgres,
                    Fault::Redis => Server::Redis,
                    _ => Server::Rabbitmq,
                };
                let stopping = Instant::now();
                servers.take_away(server).await?;
                let back_at = Instant::now() + Duration::from_secs(args.down_secs);
                while Instant::now() < back_at {
                    poll.tick().await;
                    revived.extend(fleet.revive());
                }
                servers.give_back(server, ns).await?;
                let what = format!(
                    "{fault:?} {} {:.0} s",
                    match args.servers {
                        ServerMode::Proxy => "away",
                        _ => "stopped and restarted, down",
                    },
                    stopping.elapsed().as_secs_f64()
                );
                (what, Some(moment))
            }
        };
        let when = match moment {
            Some(moment) => {
                let _ = moment.send(Instant::now());
                "it ended"
            }
            None => "the fault struck",
        };
        let _ = said.send((what, when));
    }
    let mut lines = Vec::new();
    while let Some(done) = watchers.join_next().await {
        lines.extend(done?);
    }
    lines.sort();
    let lines = lines.into_iter().map(|(_, l)| l).collect();
    Ok(lines)
}
