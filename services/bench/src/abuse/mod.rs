//! `hermes bench abuse`: what each attack of docs/security.md ("Abuse") does to a normal
//! caller. A fleet (`hermes all`, the `hermes` binary as a child process) runs on a throw-away
//! database and namespace against a fake model and channel API on loopback. For each attack,
//! rounds alternate a quiet phase and an attacked phase, the normal caller sending chat
//! completions with its own key through both; the report gives the normal caller's p50, p99
//! and error rate in each, the ratio of the medians of the per-round p99s, and what the
//! fleet answered the attacker. Then it measures the Redis bytes of run event streams per
//! chat run by platform. The database and the namespace's queues are deleted at the end.

mod attacks;
mod redis_bytes;
mod upstream;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use hermes_config::Config;
use hermes_db::api_keys::KeyScope;
use hermes_db::scratch::ScratchDb;
use hermes_types::model::{Platform, Tier};
use secrecy::ExposeSecret;

use crate::fleet_process::{free_port, hermes_binary};

pub use attacks::Attack;
use attacks::{Sample, Target};

/// The operator key of the fleet under attack (the normal caller and attacker have their own).
const OPERATOR_KEY: &str = "abuse-operator-key-0123456789abcdef";
const FORGE_SECRET: &str = "abuse-forge-secret-0123456789abcdef0123";
const INSTAGRAM_SECRET: &str = "abuse-instagram-app-secret-0123456789";
const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

#[derive(Args, Debug)]
pub struct AbuseBench {
    /// Attacks to run (all when none is named).
    #[arg(long = "attack", value_enum)]
    attacks: Vec<Attack>,
    /// Rounds of quiet and attacked phases per attack, alternated.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds the normal caller is measured in each phase.
    #[arg(long, default_value_t = 8)]
    secs: u64,
    /// The normal caller's concurrent requests.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
    /// Connections of the slow-body attack per route, and held callers.
    #[arg(long, default_value_t = 1_100)]
    connections: usize,
    /// Chat runs per platform for the Redis measurement (0: skip it).
    #[arg(long, default_value_t = 50)]
    redis_runs: usize,
}

/// The fleet process, killed when dropped.
struct Fleet {
    child: tokio::process::Child,
    http: std::net::SocketAddr,
    admin: u16,
}

pub async fn abuse(config: Config, args: AbuseBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.rounds > 0 && args.secs > 0,
        "at least one round of one second"
    );
    let id = &uuid::Uuid::now_v7().simple().to_string()[20..];
    let ns = format!("abuse{id}");
    let scratch = ScratchDb::create(&config.database_url, "hermes_bench").await?;
    eprintln!("abuse: database {}, namespace {ns}", scratch.name());
    let upstream = upstream::Upstream::start().await?;
    let (http, admin) = (free_port()?, free_port()?);
    let vars = fleet_vars(&config, &ns, &scratch, &upstream.base, http, admin);
    let result = run(&config, &args, &ns, &scratch, upstream, &vars).await;
    // The fleet's own bus settings: the broker refuses a queue declared otherwise.
    let fleet_config = Config::from_lookup(&|k| vars.get(k).cloned(), None)
        .map_err(|e| anyhow::anyhow!("the fleet's configuration: {e}"))?;
    crate::delete_namespace("abuse", &config, &ns, fleet_config.bus).await?;
    scratch.drop_now().await?;
    result
}

async fn run(
    config: &Config,
    args: &AbuseBench,
    ns: &str,
    scratch: &ScratchDb,
    upstream: Arc<upstream::Upstream>,
    vars: &HashMap<&'static str, String>,
) -> anyhow::Result<()> {
    let (normal_key, attacker_key) = seed(&scratch.db).await?;
    let fleet = spawn_fleet(ns, vars).await?;
    let target = Arc::new(Target {
        http: format!("http://{}", fleet.http),
        addr: fleet.http,
        normal_key,
        attacker_key,
        upstream: upstream.clone(),
        connections: args.connections,
    });
    let attacks = if args.attacks.is_empty() {
        Attack::ALL.to_vec()
    } else {
        args.attacks.clone()
    };
    let secs = Duration::from_secs(args.secs);
    println!(
        "abuse: {} rounds a attack, {} s a phase, normal caller at concurrency {}",
        args.rounds, args.secs, args.concurrency
    );
    println!(
        "{:<13} {:>16} {:>16} {:>7} {:>11} {:>11}  attacker answered",
        "attack", "quiet p50/p99", "attacked p50/p99", "p99 x", "quiet err", "attack err"
    );
    let mut rounds_held = 0u64;
    for attack in attacks {
        let (mut quiet, mut attacked) = (Vec::new(), Vec::new());
        let mut answered = Vec::new();
        for round in 0..args.rounds {
            // Each round holds only its own requests: one still queued from an earlier
            // round is answered at once and never holds a quiet phase.
            upstream.hold(rounds_held + 1);
            rounds_held += 1;
            quiet.push(attacks::normal(&target, args.concurrency, secs).await);
            let running = attacks::start(attack, &target).await;
            attacked.push(attacks::normal(&target, args.concurrency, secs).await);
            answered.push(running.stop().await.summary());
            // Held work ends, and the fleet drains it before the next quiet phase.
            upstream.release();
            drain(&target).await;
            eprintln!(
                "abuse: {} round {} of {} done",
                attack.name(),
                round + 1,
                args.rounds
            );
        }
        report(attack, &quiet, &attacked, &answered);
    }
    if args.redis_runs > 0 {
        upstream.release();
        let redis_url = config.redis_url.expose_secret();
        println!(
            "run event stream bytes in Redis per chat run ({} runs each):",
            args.redis_runs
        );
        for (i, kind) in redis_bytes::Kind::ALL.into_iter().enumerate() {
            let bytes =
                redis_bytes::per_run(&target, redis_url, ns, kind, args.redis_runs, i * 100_000)
                    .await?;
            println!("  {:<10} {bytes:>10.0} bytes", kind.name());
        }
    }
    drop(fleet);
    Ok(())
}

/// Wait until a normal request is answered at once again (held work drained), at most 60 s.
async fn drain(target: &Arc<Target>) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let s = attacks::normal(target, 1, Duration::from_millis(1)).await;
        if s.errors == 0 && s.pct(1.0) < 500.0 {
            return;
        }
    }
    eprintln!("abuse: the fleet did not drain within 60 s");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn report(attack: Attack, quiet: &[Sample], attacked: &[Sample], answered: &[String]) {
    let med = |s: &[Sample], p: f64| median(s.iter().map(|x| x.pct(p)).collect());
    let err = |s: &[Sample]| {
        let (e, n) = s.iter().fold((0, 0), |(e, n), x| {
            (e + x.errors, n + x.errors + x.latencies.len())
        });
        if n == 0 {
            0.0
        } else {
            100.0 * e as f64 / n as f64
        }
    };
    let (q99, a99) = (med(quiet, 0.99), med(attacked, 0.99));
    let ratio = if q99 > 0.0 { a99 / q99 } else { f64::INFINITY };
    println!(
        "{:<13} {:>7.1}/{:>6.1} ms {:>7.1}/{:>6.1} ms {:>6.2}x {:>10.2}% {:>10.2}%  {}",
        attack.name(),
        med(quiet, 0.5),
        q99,
        med(attacked, 0.5),
        a99,
        ratio,
        err(quiet),
        err(attacked),
        answered.last().map(String::as_str).unwrap_or("")
    );
}

/// The normal caller's and the attacker's keys (chat scope, no request-rate limit to speak
/// of), and the linked senders of the Redis measurement.
async fn seed(db: &hermes_db::Db) -> anyhow::Result<(String, String)> {
    use hermes_db::api_keys;
    let client = db.get().await?;
    let mut keys = Vec::new();
    for name in ["abuse-normal", "abuse-attacker"] {
        let created = api_keys::create(&client, name, None, None).await?;
        api_keys::set_scopes(&client, created.key.id, &[KeyScope::Chat]).await?;
        let limits = api_keys::KeyLimits {
            requests_per_minute: Some(10_000_000),
            ..api_keys::KeyLimits::default()
        };
        api_keys::set_limits(&client, created.key.id, &limits).await?;
        keys.push(created.secret_key);
    }
    drop(client);
    for (platform, sender) in [
        (Platform::Telegram, redis_bytes::TELEGRAM_SENDER.to_string()),
        (Platform::Whatsapp, redis_bytes::WHATSAPP_SENDER.to_string()),
    ] {
        crate::seed::user(db, "abuse", Tier::Free, &[(platform, sender)]).await?;
    }
    let normal = keys.remove(0);
    Ok((normal, keys.remove(0)))
}

/// The environment of the fleet under attack: the scratch database and namespace, every
/// channel on, the model and the channel APIs at `upstream`, no inbound limit; and the front
/// door's limits (`HERMES_UNVERIFIED_*`, `HERMES_KEY_MISSES_PER_MINUTE`) as the bench's own
/// environment sets them, so one build measures another setting of them.
fn fleet_vars(
    config: &Config,
    ns: &str,
    scratch: &ScratchDb,
    upstream: &str,
    http: u16,
    admin: u16,
) -> HashMap<&'static str, String> {
    [
        ("DATABASE_URL", scratch.url.expose_secret().to_string()),
        ("REDIS_URL", config.redis_url.expose_secret().to_string()),
        ("AMQP_URL", config.amqp_url.expose_secret().to_string()),
        ("HERMES_NAMESPACE", ns.to_string()),
        ("HERMES_HTTP_ADDR", format!("127.0.0.1:{http}")),
        ("HERMES_ADMIN_ADDR", format!("127.0.0.1:{admin}")),
        ("API_SERVER_KEY", OPERATOR_KEY.to_string()),
        ("HERMES_PROVIDER", "openai".to_string()),
        ("OPENAI_API_KEY", "abuse".to_string()),
        ("OPENAI_BASE_URL", format!("{upstream}/v1")),
        ("HERMES_MODEL", "gpt-abuse".to_string()),
        (
            "TELEGRAM_WEBHOOK_SECRET",
            redis_bytes::TELEGRAM_SECRET.to_string(),
        ),
        ("TELEGRAM_BOT_TOKEN", "5150:abuse-bot-token".to_string()),
        ("TELEGRAM_API_BASE_URL", upstream.to_string()),
        (
            "WHATSAPP_APP_SECRET",
            redis_bytes::WHATSAPP_APP_SECRET.to_string(),
        ),
        ("WHATSAPP_ACCESS_TOKEN", "abuse".to_string()),
        ("WHATSAPP_PHONE_NUMBER_ID", "5150".to_string()),
        ("WHATSAPP_API_BASE_URL", upstream.to_string()),
        ("INSTAGRAM_APP_SECRET", INSTAGRAM_SECRET.to_string()),
        ("HERMES_FORGE_WEBHOOK_SECRETS", FORGE_SECRET.to_string()),
        ("HERMES_SECRET_KEYS", SECRET_KEYS.to_string()),
        ("HERMES_IMAGE_FETCH_ALLOW", "127.0.0.1".to_string()),
        ("HERMES_INBOUND_PER_MINUTE", "10000000".to_string()),
        ("HERMES_INBOUND_BURST", "10000000".to_string()),
        ("HERMES_LOG_FORMAT", "json".to_string()),
        ("RUST_LOG", "warn".to_string()),
        ("HERMES_QUEUE_EXPIRES_SECS", "900".to_string()),
    ]
    .into_iter()
    .chain(
        FRONT_DOOR_VARS
            .iter()
            .filter_map(|&name| Some((name, std::env::var(name).ok()?))),
    )
    .collect()
}

/// The front door's settings a run may set for its fleet (docs/security.md, "Abuse").
const FRONT_DOOR_VARS: [&str; 4] = [
    "HERMES_UNVERIFIED_BODIES",
    "HERMES_UNVERIFIED_BODY_TIMEOUT_SECS",
    "HERMES_UNVERIFIED_BODY_QUEUE_SECS",
    "HERMES_KEY_MISSES_PER_MINUTE",
];

/// `hermes all` with `vars`; returns once it is ready.
async fn spawn_fleet(ns: &str, vars: &HashMap<&'static str, String>) -> anyhow::Result<Fleet> {
    let http: u16 = vars["HERMES_HTTP_ADDR"]
        .rsplit(':')
        .next()
        .unwrap_or("0")
        .parse()?;
    let admin: u16 = vars["HERMES_ADMIN_ADDR"]
        .rsplit(':')
        .next()
        .unwrap_or("0")
        .parse()?;
    let log = std::env::temp_dir().join(format!("{ns}-fleet.log"));
    eprintln!("abuse: the fleet's log is {}", log.display());
    let child = tokio::process::Command::new(hermes_binary()?)
        .arg("all")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(vars)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .kill_on_drop(true)
        .spawn()
        .context("starting hermes all")?;
    let mut fleet = Fleet {
        child,
        http: ([127, 0, 0, 1], http).into(),
        admin,
    };
    let ready = format!("http://127.0.0.1:{}/readyz", fleet.admin);
    let started = Instant::now();
    loop {
        if reqwest::get(&ready)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Ok(fleet);
        }
        if let Some(status) = fleet.child.try_wait()? {
            anyhow::bail!(
                "the fleet exited while starting ({status}); see {}",
                log.display()
            );
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "the fleet was not ready in 60 s; see {}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
