//! `hermes bench console`: each console page's server time against its floor
//! (docs/performance.md, "The console"). A throw-away database is seeded with `--runs` runs
//! (a day's share in the last hour) of `--users` users and a handful of agents; ingest runs
//! in this process with the console on. Each page is fetched one request at a time, logged
//! in; its floor is the same reads run alone in the same process, one page's worth at a
//! time: the login's lookup and the page's statements (and for the overview, its passive
//! queue declarations and its Redis reads too). Rounds alternate the two, so
//! drift touches both alike. The database, the namespace's queues and exchanges are deleted
//! at the end.

use std::time::Instant;

use chrono::Utc;
use clap::Args;
use futures_util::future::join_all;
use hermes::Service;
use hermes_bus::{Bus, Names, Stage};
use hermes_cache::Cache;
use hermes_config::Config;
use hermes_db::runs::activity;
use hermes_db::runs::search::{self, RunSearch};
use hermes_db::scratch::ScratchDb;
use hermes_db::{Db, console_sessions, users};
use hermes_gateway::budget::Budgets;
use hermes_telemetry::Metrics;
use hermes_types::ids::UserId;
use hermes_types::model::Platform;

use crate::in_process::{InProcess, Scratch, scratch_config};
use crate::stats::Latencies;

#[derive(Args, Debug)]
pub struct ConsoleBench {
    /// Runs in the database.
    #[arg(long, default_value_t = 100_000)]
    runs: u32,
    /// Users the runs belong to.
    #[arg(long, default_value_t = 10_000)]
    users: u32,
    /// Requests to each page (and as many floors) a round.
    #[arg(long, default_value_t = 100)]
    requests: usize,
    /// Rounds the two measurements alternate in.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// The pages measured.
#[derive(Clone, Copy, Debug)]
enum Page {
    Overview,
    Runs,
    RunsOfUser,
    RunsLastHour,
    Users,
}

impl Page {
    const ALL: [Page; 5] = [
        Page::Overview,
        Page::Runs,
        Page::RunsOfUser,
        Page::RunsLastHour,
        Page::Users,
    ];

    fn name(self) -> &'static str {
        match self {
            Page::Overview => "overview",
            Page::Runs => "runs",
            Page::RunsOfUser => "runs of a user",
            Page::RunsLastHour => "runs, last hour",
            Page::Users => "users",
        }
    }
}

pub async fn console(config: Config, args: ConsoleBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.rounds > 0 && args.requests > 0 && args.users > 0,
        "--rounds, --requests and --users must be above 0"
    );
    let scratch = Scratch::create("console", "cbench", &config).await?;
    let fleet_config = bench_config(&config, &scratch.ns, &scratch.db)?;
    let settings = fleet_config.bus.clone();
    let result = Box::pin(run(fleet_config, &args, &scratch.db.db)).await;
    scratch.remove("console", &config, settings).await?;
    result
}

/// The machine's servers, the scratch database and namespace, the console on.
fn bench_config(config: &Config, ns: &str, scratch: &ScratchDb) -> anyhow::Result<Config> {
    scratch_config(
        config,
        ns,
        scratch,
        &[
            ("HERMES_CONSOLE", "true"),
            ("API_SERVER_KEY", "bench-console-operator-key"),
        ],
    )
}

/// `users` users and `runs` runs over the last 30 days, a thirtieth of a day's share in the
/// last hour; every run a user's, every tenth an agent's.
async fn seed(db: &Db, args: &ConsoleBench) -> anyhow::Result<UserId> {
    let started = Instant::now();
    let c = db.get().await?;
    c.batch_execute(
        "INSERT INTO agents (id, workspace_id, profile_key, kind, display_name)
         SELECT gen_random_uuid(), w.id, 'bench-' || g, 'internal', 'Bench ' || g
         FROM workspaces w, generate_series(1, 10) g WHERE w.slug = 'default'",
    )
    .await?;
    c.execute(
        "INSERT INTO users (workspace_id, display_name, credits, referral_code)
         SELECT w.id, 'user ' || g, 100, 'bench' || g
         FROM workspaces w, generate_series(1, $1::int) g WHERE w.slug = 'default'",
        &[&(args.users as i32)],
    )
    .await?;
    c.execute(
        "WITH u AS (SELECT id, row_number() OVER () AS n FROM users),
              a AS (SELECT id, row_number() OVER () AS n FROM agents)
         INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier, user_id,
                                 agent_id, model, tokens_in, tokens_out, cost_micro_usd,
                                 created_at, finished_at)
         SELECT gen_random_uuid(), (ARRAY['telegram','whatsapp','slack','api'])[1 + g % 4],
                's' || g % $2, 'c' || g % $2, 'completed', 'free', u.id,
                CASE WHEN g % 10 = 0 THEN a.id END, 'gpt-bench', 100, 50, 120,
                t, t + make_interval(secs => 0.5 + (g % 40) / 10.0)
         FROM generate_series(1, $1::int) g
         JOIN u ON u.n = 1 + g % $2
         JOIN a ON a.n = 1 + g % 10
         CROSS JOIN LATERAL (SELECT now() - make_interval(secs =>
             CASE WHEN g % 720 = 0 THEN (g % 3600) ELSE (g::bigint * 2592000 / $1) END) AS t) x",
        &[&(args.runs as i32), &(args.users as i32)],
    )
    .await?;
    c.batch_execute("ANALYZE").await?;
    let user: UserId = c
        .query_one("SELECT user_id FROM agent_runs LIMIT 1", &[])
        .await?
        .get(0);
    eprintln!(
        "console: seeded {} runs of {} users in {:.1} s",
        args.runs,
        args.users,
        started.elapsed().as_secs_f64()
    );
    Ok(user)
}

/// What the floors read through: the database, and for the overview the broker and Redis.
struct Reads {
    db: Db,
    bus: Bus,
    cache: Cache,
    budgets: Budgets,
}

async fn run(fleet_config: Config, args: &ConsoleBench, db: &Db) -> anyhow::Result<()> {
    let user = seed(db, args).await?;
    let metrics = Metrics::new();
    let bus = Bus::connect(
        fleet_config.amqp_url.clone(),
        Names::new(fleet_config.namespace.clone()),
        fleet_config.bus.clone(),
        metrics.clone(),
    )
    .await?;
    let cache = Cache::new(
        &fleet_config.redis_url,
        fleet_config.namespace.clone(),
        metrics.clone(),
    )?;
    let reads = Reads {
        db: db.clone(),
        budgets: Budgets::new(cache.clone(), Some(db.clone()), metrics, &fleet_config),
        bus,
        cache,
    };
    let fleet = InProcess::start(fleet_config, &[Service::Ingest]).await?;
    let base = fleet.base.clone();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let until = Utc::now() + chrono::Duration::hours(1);
    let login = console_sessions::start(&db.get().await?, None, until).await?;
    let cookie = format!("hermes_console={}", login.token);
    let mut pages: Vec<(Latencies, Latencies)> =
        Page::ALL.iter().map(|_| Default::default()).collect();
    for round in 0..args.rounds {
        for (k, page) in Page::ALL.iter().enumerate() {
            let url = format!("{base}{}", path(*page, user));
            for _ in 0..args.requests {
                let t = Instant::now();
                let resp = client.get(&url).header("cookie", &cookie).send().await?;
                anyhow::ensure!(resp.status() == 200, "{url}: {}", resp.status());
                resp.bytes().await?;
                pages[k].0.0.push(t.elapsed().as_micros() as u64);
            }
            for _ in 0..args.requests {
                let t = Instant::now();
                floor(&reads, *page, user, &login.token).await?;
                pages[k].1.0.push(t.elapsed().as_micros() as u64);
            }
        }
        eprintln!("console: round {} of {} done", round + 1, args.rounds);
    }
    fleet.stop().await?;
    reads.bus.close().await;
    println!(
        "console: {} runs, {} users; {} requests a page and as many floors, {} rounds alternated",
        args.runs,
        args.users,
        args.requests * args.rounds,
        args.rounds
    );
    println!(
        "{:<16} {:>9} {:>9}   {:>9} {:>9}   {:>6} {:>6}",
        "page", "p50 ms", "p99 ms", "floor p50", "floor p99", "p50 ×", "p99 ×"
    );
    for (page, (served, alone)) in Page::ALL.iter().zip(&pages) {
        println!(
            "{:<16} {:>9.2} {:>9.2}   {:>9.2} {:>9.2}   {:>6.2} {:>6.2}",
            page.name(),
            served.pct(0.5),
            served.pct(0.99),
            alone.pct(0.5),
            alone.pct(0.99),
            served.pct(0.5) / alone.pct(0.5).max(0.001),
            served.pct(0.99) / alone.pct(0.99).max(0.001),
        );
    }
    Ok(())
}

fn path(page: Page, user: UserId) -> String {
    match page {
        Page::Overview => "/console/overview".into(),
        Page::Runs => "/console/runs".into(),
        Page::RunsOfUser => format!("/console/runs?user={user}"),
        Page::RunsLastHour => format!(
            "/console/runs?since={}",
            (Utc::now() - chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M")
        ),
        Page::Users => "/console/users".into(),
    }
}

/// The page's reads alone: the login's lookup, then its statements; for the overview also
/// every stage's two queues (asked at once), the breakers and the budgets, as it asks them.
async fn floor(r: &Reads, page: Page, user: UserId, token: &str) -> anyhow::Result<()> {
    let c = r.db.get().await?;
    console_sessions::find(&c, token).await?;
    let list = |s: RunSearch<'static>| RunSearch { limit: 51, ..s };
    match page {
        Page::Overview => {
            let names = r.bus.names();
            let queues = Stage::ALL
                .iter()
                .flat_map(|s| [names.queue(*s), names.parking(*s)])
                .collect::<Vec<_>>();
            let (hour, depths, breakers, spend) = tokio::join!(
                activity::last_hour(&c, Utc::now()),
                join_all(queues.iter().map(|q| r.bus.queue_stats(q))),
                r.cache.breakers_open_until_ms(&Platform::ALL),
                r.budgets.status(),
            );
            hour?;
            for d in depths {
                d?;
            }
            breakers?;
            spend?;
        }
        Page::Runs => drop(search::search(&c, &list(RunSearch::default())).await?),
        Page::RunsOfUser => {
            let s = list(RunSearch {
                user: Some(user),
                ..Default::default()
            });
            drop(search::search(&c, &s).await?)
        }
        Page::RunsLastHour => {
            let s = list(RunSearch {
                since: Some(Utc::now() - chrono::Duration::hours(1)),
                ..Default::default()
            });
            drop(search::search(&c, &s).await?)
        }
        Page::Users => drop(users::page(&c, None, 50).await?),
    }
    Ok(())
}
