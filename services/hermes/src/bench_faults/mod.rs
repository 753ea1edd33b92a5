//! `hermes bench faults`: the fleet as separate processes (ingest, two routers, two llm, tools,
//! two delivery), a ledgered Telegram load against the mock model and a fake Bot API, and
//! faults injected while it runs: `kill -9` and SIGTERM of random processes (restarted as
//! Kubernetes would), and PostgreSQL, Redis or RabbitMQ taken away for a while. The servers are
//! the machine's own, reached through chaos proxies this command runs, so taking one away cuts
//! and refuses the fleet's connections without stopping a server others use; a Redis "restart"
//! also forgets every key of the run's namespace, as a Redis without persistence would. At the
//! end the ledger must add up (docs/faults.md), or the command exits non-zero.

mod fleet;
mod ledger;
mod load;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, ValueEnum};
use hermes_bus::{Bus, Names};
use hermes_config::{Config, Namespace};
use hermes_db::scratch::ScratchDb;
use hermes_net::chaos::ChaosProxy;
use hermes_telemetry::Metrics;
use hermes_types::model::{Platform, Tier};
use secrecy::ExposeSecret;

use fleet::Fleet;
use ledger::Ledger;
use load::Seen;

/// A fault to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Fault {
    /// `kill -9` of a random process, restarted at once.
    Kill9,
    /// SIGTERM of a random process (a rolling restart), restarted once it exited.
    Sigterm,
    /// PostgreSQL away for `--down-secs`.
    Postgres,
    /// Redis away for `--down-secs`, and empty when it comes back (no persistence).
    Redis,
    /// RabbitMQ away for `--down-secs`.
    Rabbitmq,
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

/// A proxy in front of the server of `url`, and `url` pointed at it.
async fn proxied(url: &str, default_port: u16) -> anyhow::Result<(ChaosProxy, String)> {
    let mut u = url::Url::parse(url).context("a server URL")?;
    let target = format!(
        "{}:{}",
        u.host_str().unwrap_or("127.0.0.1"),
        u.port().unwrap_or(default_port)
    );
    let addr = tokio::net::lookup_host(&target)
        .await?
        .next()
        .with_context(|| format!("cannot resolve {target}"))?;
    let proxy = ChaosProxy::start(addr).await;
    u.set_ip_host(proxy.addr.ip())
        .map_err(|()| anyhow::anyhow!("cannot point {url} at the proxy"))?;
    u.set_port(Some(proxy.addr.port()))
        .map_err(|()| anyhow::anyhow!("cannot point {url} at the proxy"))?;
    Ok((proxy, u.to_string()))
}

pub async fn faults(config: Config, args: FaultsBench) -> anyhow::Result<()> {
    let id = &uuid::Uuid::now_v7().simple().to_string()[20..];
    let ns = format!("faults{id}");
    let scratch = ScratchDb::create(&config.database_url, "hermes_faults").await?;
    eprintln!("faults: database {}, namespace {ns}", scratch.name());
    let result = run(&config, &args, &ns, &scratch).await;
    scratch.drop_now().await?;
    result
}

async fn run(
    config: &Config,
    args: &FaultsBench,
    ns: &str,
    scratch: &ScratchDb,
) -> anyhow::Result<()> {
    seed_users(&scratch.db, args.users).await?;
    let (pg, pg_url) = proxied(scratch.url.expose_secret(), 5432).await?;
    let (redis, redis_url) = proxied(config.redis_url.expose_secret(), 6379).await?;
    let (broker, amqp_url) = proxied(config.amqp_url.expose_secret(), 5672).await?;
    let seen = Arc::new(Seen::default());
    let telegram = load::fake_telegram(seen.clone()).await?;
    let http = fleet::free_port()?;
    let logs = std::env::temp_dir().join(format!("hermes-{ns}"));
    let retry_delays = RETRY_DELAYS.map(|s| s.to_string()).join(",");
    std::fs::create_dir_all(&logs)?;
    let env: Vec<(String, String)> = [
        ("DATABASE_URL", pg_url.as_str()),
        ("REDIS_URL", redis_url.as_str()),
        ("AMQP_URL", amqp_url.as_str()),
        ("HERMES_NAMESPACE", ns),
        ("HERMES_PROVIDER", "mock"),
        ("API_SERVER_KEY", "faults-api-key-0123456789"),
        ("TELEGRAM_WEBHOOK_SECRET", load::TG_SECRET),
        ("TELEGRAM_BOT_TOKEN", load::TG_TOKEN),
        ("TELEGRAM_API_BASE_URL", telegram.as_str()),
        ("HERMES_HTTP_ADDR", &format!("127.0.0.1:{http}")),
        ("HERMES_INBOUND_PER_MINUTE", "100000"),
        ("HERMES_INBOUND_BURST", "100000"),
        ("HERMES_QUEUE_EXPIRES_SECS", &QUEUE_EXPIRES_SECS.to_string()),
        ("HERMES_DELIVERY_RETRY_DELAYS", &retry_delays),
        ("HERMES_SEND_PAUSES_MS", "10,10,10"),
        ("HERMES_SHUTDOWN_GRACE_SECS", "10"),
        // Eight processes share one server's `max_connections` (100 by default).
        ("HERMES_DB_POOL_SIZE", "8"),
        ("HERMES_LOG_FORMAT", "json"),
        ("RUST_LOG", "warn"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    eprintln!(
        "faults: starting {} processes (logs in {})",
        SERVICES.len(),
        logs.display()
    );
    let mut fleet = Fleet::start(&SERVICES, env, &logs).await?;
    let names = Names::new(Namespace::parse(ns).map_err(anyhow::Error::msg)?);
    // The fleet's bus settings exactly: the broker refuses a queue declared otherwise.
    let mut settings = config.bus.clone();
    settings.queue_expires = Some(Duration::from_secs(QUEUE_EXPIRES_SECS));
    settings.retry_delays = RETRY_DELAYS
        .iter()
        .map(|s| Duration::from_secs(*s))
        .collect();
    let bus = Bus::connect(config.amqp_url.clone(), names, settings, Metrics::new()).await?;

    let url = format!("http://127.0.0.1:{http}/webhooks/telegram");
    let load = tokio::spawn(load::run(
        url,
        args.messages,
        args.users,
        args.rate,
        seen.clone(),
    ));
    let injected = inject(args, &mut fleet, &pg, &redis, &broker, config, ns, &seen).await;
    load.await?;
    eprintln!(
        "faults: load sent; waiting up to {} s for every answer",
        args.settle_secs
    );
    let settled = settle(args, &seen, &scratch.db).await;
    let ledger = Ledger::read(args.messages, &seen, &scratch.db, &bus).await?;
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
    let problems = ledger.problems(args.max_doubled_percent);
    if !settled || !problems.is_empty() {
        anyhow::bail!("the ledger does not add up: {}", problems.join("; "));
    }
    println!("faults: the ledger adds up");
    Ok(())
}

/// Give `users` Telegram senders a user with ample credits each.
async fn seed_users(db: &hermes_db::Db, users: usize) -> anyhow::Result<()> {
    use hermes_db::users;
    let mut client = db.get().await?;
    for u in 0..users {
        let sender = load::sender(u, users).to_string();
        let tx = client.transaction().await?;
        let user = users::create(
            &tx,
            &users::NewUser {
                workspace: "default",
                display_name: Some(&sender),
                tier: Tier::Free,
                credits: 1_000_000,
            },
        )
        .await?;
        tx.commit().await?;
        users::link_channel(&client, user.id, Platform::Telegram, &sender, true, None).await?;
    }
    Ok(())
}

/// Inject the faults, spread over the load by messages accepted; returns one line per fault
/// with its time to recover (from its end to the next answer).
#[allow(clippy::too_many_arguments)]
async fn inject(
    args: &FaultsBench,
    fleet: &mut Fleet,
    pg: &ChaosProxy,
    redis: &ChaosProxy,
    broker: &ChaosProxy,
    config: &Config,
    ns: &str,
    seen: &Arc<Seen>,
) -> anyhow::Result<Vec<String>> {
    let plan: Vec<Fault> = (0..args.count)
        .flat_map(|_| args.faults.iter().copied())
        .collect();
    let mut watchers = tokio::task::JoinSet::new();
    let mut poll = tokio::time::interval(Duration::from_millis(50));
    for (n, fault) in plan.iter().enumerate() {
        // Evenly over the load, by messages accepted.
        let at = args.messages * (n + 1) / (plan.len() + 1);
        while seen.accepted.load(std::sync::atomic::Ordering::SeqCst) < at {
            poll.tick().await;
        }
        let what = match fault {
            Fault::Kill9 | Fault::Sigterm => {
                let i = rand::random_range(0..fleet.procs.len());
                let service = fleet.procs[i].service;
                if *fault == Fault::Kill9 {
                    fleet.kill_and_restart(i).await?;
                    format!("kill -9 of {service}")
                } else {
                    let clean = fleet.stop_and_restart(i, Duration::from_secs(20)).await?;
                    format!("SIGTERM of {service} (clean exit: {clean})")
                }
            }
            Fault::Postgres | Fault::Redis | Fault::Rabbitmq => {
                let proxy = match fault {
                    Fault::Postgres => pg,
                    Fault::Redis => redis,
                    _ => broker,
                };
                proxy.set_down(true);
                tokio::time::sleep(Duration::from_secs(args.down_secs)).await;
                if *fault == Fault::Redis {
                    forget_namespace(config, ns).await?;
                }
                proxy.set_down(false);
                format!("{fault:?} away {} s", args.down_secs)
            }
        };
        // Recovered once every message accepted by now has its answer; watched beside the
        // next faults, which keep to their schedule.
        let backlog = seen.accepted.load(std::sync::atomic::Ordering::SeqCst);
        let seen = seen.clone();
        watchers.spawn(async move {
            let back = Instant::now();
            let mut poll = tokio::time::interval(Duration::from_millis(50));
            let recovered = tokio::time::timeout(Duration::from_secs(RECOVERY_BOUND), async {
                while seen.answered() < backlog {
                    poll.tick().await;
                }
            })
            .await
            .is_ok();
            let line = if recovered {
                format!(
                    "{what}: the {backlog} messages accepted by then answered {:.2} s after it ended",
                    back.elapsed().as_secs_f64()
                )
            } else {
                format!("{what}: the {backlog} messages accepted by then not answered within {RECOVERY_BOUND} s")
            };
            eprintln!("faults: {line}");
            (n, line)
        });
    }
    let mut lines = Vec::new();
    while let Some(done) = watchers.join_next().await {
        lines.push(done?);
    }
    lines.sort();
    let lines = lines.into_iter().map(|(_, l)| l).collect();
    Ok(lines)
}

/// A Redis that restarts without persistence has forgotten everything: delete every key of
/// the run's namespace (and only those; the server is shared).
async fn forget_namespace(config: &Config, ns: &str) -> anyhow::Result<()> {
    let client = hermes_cache::client(config.redis_url.expose_secret())?;
    let mut c = client.get_multiplexed_async_connection().await?;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{ns}:*"))
        .query_async(&mut c)
        .await?;
    for chunk in keys.chunks(500) {
        let _: () = redis::cmd("DEL").arg(chunk).query_async(&mut c).await?;
    }
    Ok(())
}

/// Wait until every message is answered and no run is open, at most `--settle-secs`.
async fn settle(args: &FaultsBench, seen: &Seen, db: &hermes_db::Db) -> bool {
    let mut poll = tokio::time::interval(Duration::from_millis(500));
    tokio::time::timeout(Duration::from_secs(args.settle_secs), async {
        loop {
            poll.tick().await;
            if seen.answered() < args.messages {
                continue;
            }
            let open = match db.get().await {
                Ok(c) => c
                    .query_one(
                        "SELECT count(*) FROM agent_runs WHERE status NOT IN ('completed', 'failed')",
                        &[],
                    )
                    .await
                    .map(|r| r.get::<_, i64>(0))
                    .unwrap_or(1),
                Err(_) => 1,
            };
            if open == 0 {
                return;
            }
        }
    })
    .await
    .is_ok()
}
