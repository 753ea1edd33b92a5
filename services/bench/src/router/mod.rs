//! `hermes bench router`: the router stage alone, in this process, against the configured
//! PostgreSQL, Redis and RabbitMQ, with warm caches and a local fake embeddings endpoint.
//! It works in a private database and namespace (dropped or expiring afterwards), seeds
//! users with channels, credits and embedded facts, warms every user's soul, then publishes
//! a burst of messages and reports messages/s and the stage-time percentiles.

use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::post;
use clap::Args;
use hermes_config::Config;
use hermes_db::Db;
use hermes_db::scratch::ScratchDb;
use hermes_runtime::context::Ctx;
use hermes_telemetry::Metrics;
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::{Inbound, MessageEvent, Platform};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

mod floor;

#[derive(Args, Debug)]
pub struct RouterBench {
    /// Messages in the measured burst.
    #[arg(long, default_value_t = 20_000)]
    messages: u32,
    /// Distinct users (each with a linked REST channel and a warm soul).
    #[arg(long, default_value_t = 1_000)]
    users: u32,
    /// Embedded memory facts per user (ranked by semantic recall on every message).
    #[arg(long, default_value_t = 20)]
    facts: u32,
    /// Dimensions of the fake embeddings.
    #[arg(long, default_value_t = 256)]
    dims: usize,
    /// Also measure the floor: the router's own statements per message replayed through
    /// pgbench on the same database, alternated with the router round by round, and print
    /// the router's messages/s as a share of it (docs/performance.md, Router).
    #[arg(long)]
    with_floor: bool,
    /// Rounds of the burst (and of the floor); default 3 with `--with-floor`, else 1.
    #[arg(long)]
    rounds: Option<usize>,
    /// Seconds of each pgbench replay.
    #[arg(long, default_value_t = 15)]
    floor_secs: u64,
    /// pgbench connections; default the router's consumer concurrency (HERMES_PREFETCH).
    #[arg(long)]
    floor_clients: Option<usize>,
}

/// A deterministic unit-ish vector for a text: the fake embeddings endpoint's answer.
fn fake_vector(text: &str, dims: usize) -> Vec<f32> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    (0..dims)
        .map(|i| {
            for b in text.bytes().chain([i as u8]) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x100_0000_01b3);
            }
            ((h >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

async fn embeddings_server(dims: usize) -> anyhow::Result<String> {
    let app = axum::Router::new().route(
        "/embeddings",
        post(move |Json(body): Json<Value>| async move {
            let data: Vec<Value> = body["input"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, t)| json!({"index": i, "embedding": fake_vector(t.as_str().unwrap_or(""), dims)}))
                .collect();
            Json(json!({ "data": data }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}"))
}

async fn seed(db: &Db, args: &RouterBench, credits: i64) -> anyhow::Result<()> {
    let c = db.get().await?;
    c.execute(
        "INSERT INTO users (id, workspace_id, tier, credits, referral_code)
         SELECT gen_random_uuid(), (SELECT id FROM workspaces WHERE slug = 'default'), 'free', $2,
                'BENCH-' || g
         FROM generate_series(1, $1::int) g",
        &[&(args.users as i32), &credits],
    )
    .await?;
    c.execute(
        "INSERT INTO credit_ledger (user_id, reason, delta, balance_after, note)
         SELECT id, 'grant', credits, credits, 'bench' FROM users",
        &[],
    )
    .await?;
    c.execute(
        "INSERT INTO user_channels (user_id, platform, sender_id)
         SELECT id, 'rest', 'bench-' || substr(referral_code, 7) FROM users",
        &[],
    )
    .await?;
    c.execute(
        "INSERT INTO user_memory (user_id, key, value, structural)
         SELECT id, 'diet', 'pescatarian', true FROM users",
        &[],
    )
    .await?;
    let users: Vec<uuid::Uuid> = c
        .query("SELECT id FROM users", &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let stmt = c
        .prepare(
            "INSERT INTO user_memory (user_id, key, value, structural, embedding)
             VALUES ($1, $2, $3, false, $4)",
        )
        .await?;
    for u in &users {
        for f in 0..args.facts {
            let value = format!("fact {f} about this user");
            let v = fake_vector(&format!("{u}{f}"), args.dims);
            c.execute(&stmt, &[u, &format!("note_{f}"), &value, &v])
                .await?;
        }
    }
    Ok(())
}

fn message(sender: u32, i: u32) -> Inbound {
    Inbound::of(MessageEvent {
        platform: Platform::Rest,
        sender_id: format!("bench-{sender}"),
        chat_id: format!("bench-{sender}"),
        text: Some(format!(
            "find me a quiet sushi place near the beach, take {i}"
        )),
        media: Vec::new(),
        external_message_id: None,
        sender_name: None,
        received_at: chrono::Utc::now(),
        metadata: None,
    })
}

/// Wait until the router acked `n` messages after committing them. It reads the stage's own
/// counter, not the database: polling `processed_messages` would load the PostgreSQL being
/// measured (a count over a growing index fifty times a second).
async fn wait_for(metrics: &Metrics, queue: &str, n: u64, limit: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    let acked = metrics.bus.messages.with_label_values(&[queue, "acked"]);
    while acked.get() < n {
        anyhow::ensure!(
            started.elapsed() < limit,
            "the router did not finish within {limit:?} ({} of {n} acked)",
            acked.get()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// (upper bound, cumulative count) of the router's stage histogram.
fn buckets(m: &Metrics) -> Vec<(f64, u64)> {
    use prometheus::core::Collector;
    let h = m.stages.duration.with_label_values(&["router"]);
    let mut out = Vec::new();
    for mf in h.collect() {
        for metric in mf.get_metric() {
            for b in metric.get_histogram().get_bucket() {
                out.push((b.upper_bound(), b.cumulative_count()));
            }
            out.push((f64::INFINITY, metric.get_histogram().get_sample_count()));
        }
    }
    out
}

/// histogram_quantile over the difference of two snapshots (linear within a bucket).
fn quantile(q: f64, before: &[(f64, u64)], after: &[(f64, u64)]) -> f64 {
    let delta: Vec<(f64, u64)> = after
        .iter()
        .zip(before)
        .map(|((le, a), (_, b))| (*le, a - b))
        .collect();
    let total = delta.last().map(|d| d.1).unwrap_or(0) as f64;
    let rank = q * total;
    let mut prev = (0.0, 0u64);
    for (le, c) in delta {
        if c as f64 >= rank {
            if le.is_infinite() {
                return prev.0;
            }
            let in_bucket = (c - prev.1) as f64;
            let frac = if in_bucket > 0.0 {
                (rank - prev.1 as f64) / in_bucket
            } else {
                1.0
            };
            return prev.0 + (le - prev.0) * frac;
        }
        prev = (le, c);
    }
    prev.0
}

pub async fn router(mut config: Config, args: RouterBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.users > 0 && args.messages > 0,
        "--users and --messages must be above 0"
    );
    let scratch = ScratchDb::create(&config.database_url, "hermes_bench").await?;
    config.database_url = scratch.url.clone();
    // The database's random suffix names the namespace too (its queues are deleted at the end,
    // and expire if the run dies first).
    let id = scratch.name().trim_start_matches("hermes_bench_");
    config.namespace =
        hermes_config::Namespace::parse(&format!("bench{id}")).map_err(anyhow::Error::msg)?;
    config.bus.queue_expires = Some(Duration::from_secs(60));
    config.router.embeddings_url = Some(embeddings_server(args.dims).await?.parse()?);
    // Ctrl-C still drops the scratch database (pgbench's connections with it).
    let result = tokio::select! {
        r = measure(&config, &scratch, &args) => r,
        signal = crate::interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
    };
    scratch.drop_now().await?;
    result
}

async fn measure(config: &Config, scratch: &ScratchDb, args: &RouterBench) -> anyhow::Result<()> {
    let db = &scratch.db;
    let rounds = args
        .rounds
        .unwrap_or(if args.with_floor { 3 } else { 1 })
        .max(1);
    let seeding = Instant::now();
    let total = u64::from(args.messages) * rounds as u64;
    seed(db, args, i64::try_from(total).unwrap_or(i64::MAX) + 1).await?;
    println!(
        "seeded {} users x {} facts ({} dims) in {:.1}s",
        args.users,
        args.facts,
        args.dims,
        seeding.elapsed().as_secs_f64()
    );
    let metrics = Metrics::new();
    let ctx = Ctx::connect(config.clone(), metrics.clone()).await?;
    let stop = CancellationToken::new();
    let router = tokio::spawn(hermes_router::run(ctx.with_stop(stop.clone())));
    // As in `hermes router`: the process's outbox relay publishes what the stage commits.
    let relay = hermes_runtime::relay::Relay::new(ctx.db.clone(), ctx.bus.clone(), metrics.clone());
    let relay = tokio::spawn(relay.run(stop.clone()));
    let result = rounds_of(config, scratch, args, rounds, &ctx, &metrics).await;
    stop.cancel();
    let _ = router.await;
    let _ = relay.await;
    // The run's queues cost the broker files and CPU; expiry is only the backstop.
    if let Err(e) = ctx.bus.delete_topology().await {
        eprintln!("bench router: cannot delete the run's queues (they expire): {e}");
    }
    ctx.bus.close().await;
    result
}

/// Warm every user, then run the rounds: a burst through the router, and with
/// `--with-floor` the pgbench replays, one after the other.
async fn rounds_of(
    config: &Config,
    scratch: &ScratchDb,
    args: &RouterBench,
    rounds: usize,
    ctx: &Ctx,
    metrics: &Metrics,
) -> anyhow::Result<()> {
    // Warm every user's soul (and the connection pools).
    for u in 1..=args.users {
        ctx.bus
            .publish(&Envelope::new(RunId::new(), None, &message(u, 0)))
            .await?;
    }
    let queue = ctx.bus.names().queue(hermes_bus::Stage::Router);
    wait_for(
        metrics,
        &queue,
        u64::from(args.users),
        Duration::from_secs(300),
    )
    .await?;
    let machine = crate::procstat::load_average();
    let mut bursts = Vec::new();
    let mut floors = Vec::new();
    for round in 0..rounds {
        let b = burst(config, ctx, metrics, args, round).await?;
        b.print();
        if args.with_floor {
            let group = b.mean_group.round().max(1.0) as usize;
            let body_len = outbox_body_len(&scratch.db).await?;
            let setup = floor::Setup {
                url: &scratch.url,
                users: args.users,
                body_len,
                clients: args
                    .floor_clients
                    .unwrap_or(usize::from(config.bus.prefetch)),
                secs: args.floor_secs,
            };
            let grouped = floor::replay(&setup, group).await?;
            let alone = if group == 1 {
                grouped
            } else {
                floor::replay(&setup, 1).await?
            };
            println!(
                "floor (pgbench, {} clients, {body_len}-byte outbox body): {:.0} messages/s in groups of {group}, {:.0} messages/s one per transaction ({} + {} failed after retries)",
                setup.clients,
                grouped.messages_per_sec,
                alone.messages_per_sec,
                grouped.failed,
                alone.failed
            );
            floors.push((group, grouped, alone));
        }
        bursts.push(b);
    }
    // What the counter promised, the database holds: every message made its run.
    let runs: i64 = scratch
        .db
        .get()
        .await?
        .query_one("SELECT count(*) FROM agent_runs WHERE platform = 'rest' AND input_text LIKE '%, take %'", &[])
        .await?
        .get(0);
    let expected = i64::from(args.users) + i64::from(args.messages) * rounds as i64;
    anyhow::ensure!(
        runs == expected,
        "{runs} runs in the database for {expected} messages"
    );
    if args.with_floor {
        report_floor(&bursts, &floors, &machine);
    }
    Ok(())
}

/// The mean size of the outbox bodies the router wrote (its LLM requests).
async fn outbox_body_len(db: &Db) -> anyhow::Result<usize> {
    let len: i32 = db
        .get()
        .await?
        .query_one(
            "SELECT coalesce(avg(length(body)), 0)::int FROM outbox WHERE stage = 'llm'",
            &[],
        )
        .await?
        .get(0);
    Ok(usize::try_from(len).unwrap_or(0))
}

/// Print the router against its floor: each figure the median of the rounds.
fn report_floor(bursts: &[Burst], floors: &[(usize, floor::Replay, floor::Replay)], machine: &str) {
    use crate::stats::{Ratio, Target, median};
    let router = median(bursts.iter().map(|b| b.rate).collect());
    let grouped = median(floors.iter().map(|f| f.1.messages_per_sec).collect());
    let alone = median(floors.iter().map(|f| f.2.messages_per_sec).collect());
    let groups: Vec<String> = floors.iter().map(|f| f.0.to_string()).collect();
    println!(
        "router against its floor, medians of {} rounds (load average at the start {machine}):",
        bursts.len()
    );
    println!(
        "{:<58} {:>10} {:>10} {:>8} {:>8} {:>5}",
        "figure", "router", "floor", "ratio", "target", "met"
    );
    for (name, floor) in [
        (
            format!(
                "messages/s ÷ pgbench, commit groups of {}",
                groups.join("/")
            ),
            grouped,
        ),
        (
            "messages/s ÷ pgbench, one message per transaction".to_string(),
            alone,
        ),
    ] {
        let r = Ratio {
            measured: router,
            floor,
            target: Target::AtLeast(0.8),
        };
        println!(
            "{name:<58} {router:>10.0} {floor:>10.0} {:>8} {:>8} {:>5}",
            r.value_text(true),
            r.target_text(true),
            if r.meets() { "yes" } else { "no" }
        );
    }
}

/// One burst's figures.
struct Burst {
    messages: u32,
    rate: f64,
    elapsed: Duration,
    published: Duration,
    p50: f64,
    p99: f64,
    cpu: (f64, Option<f64>),
    transactions: u64,
    mean_group: f64,
    fallbacks: u64,
    commit_group: usize,
}

impl Burst {
    fn print(&self) {
        println!(
            "router: {} messages in {:.2}s = {:.0} messages/s (published in {:.2}s)",
            self.messages,
            self.elapsed.as_secs_f64(),
            self.rate,
            self.published.as_secs_f64()
        );
        println!(
            "stage time: p50 {:.1} ms, p99 {:.1} ms (interpolated from hermes_stage_duration_seconds)",
            self.p50 * 1000.0,
            self.p99 * 1000.0
        );
        println!(
            "CPU per message: {:.2} ms on the whole machine (this process {:.2} ms: the router, its relay, the publisher and the fake embeddings; the rest is PostgreSQL, RabbitMQ and Redis)",
            self.cpu.0,
            self.cpu.1.unwrap_or(0.0)
        );
        println!(
            "commits: {} transactions for {} messages (mean group {:.1}, HERMES_COMMIT_GROUP {}); {} groups redone one by one",
            self.transactions, self.messages, self.mean_group, self.commit_group, self.fallbacks,
        );
    }
}

/// Publish one round's burst and wait until the router acked all of it.
async fn burst(
    config: &Config,
    ctx: &Ctx,
    metrics: &Metrics,
    args: &RouterBench,
    round: usize,
) -> anyhow::Result<Burst> {
    let queue = ctx.bus.names().queue(hermes_bus::Stage::Router);
    let before = buckets(metrics);
    let groups = metrics
        .stages
        .commit_batch_size
        .with_label_values(&["router"]);
    let fallbacks = metrics
        .stages
        .commit_batch_fallbacks
        .with_label_values(&["router"]);
    let (groups_before, sum_before, fallbacks_before) = (
        groups.get_sample_count(),
        groups.get_sample_sum(),
        fallbacks.get(),
    );
    let cpu_before = crate::procstat::CpuTicks::now(Some(std::process::id()));
    let started = Instant::now();
    let first = args.messages * round as u32;
    // Publish in windows of 512 confirms at a time (the bus pipelines within a window).
    let ids: Vec<u32> = (first..first + args.messages).collect();
    for chunk in ids.chunks(512) {
        let sends = chunk.iter().map(|&i| {
            let bus = ctx.bus.clone();
            async move {
                bus.publish(&Envelope::new(
                    RunId::new(),
                    None,
                    &message(i % args.users + 1, i + 1),
                ))
                .await
            }
        });
        for r in futures_util::future::join_all(sends).await {
            r?;
        }
    }
    let published = started.elapsed();
    wait_for(
        metrics,
        &queue,
        u64::from(args.users) + u64::from(args.messages) * (round as u64 + 1),
        Duration::from_secs(900),
    )
    .await?;
    let elapsed = started.elapsed();
    let cpu = crate::procstat::CpuTicks::now(Some(std::process::id()))
        .per_item(cpu_before, u64::from(args.messages));
    let after = buckets(metrics);
    let transactions = groups.get_sample_count() - groups_before;
    let grouped = groups.get_sample_sum() - sum_before;
    Ok(Burst {
        messages: args.messages,
        rate: f64::from(args.messages) / elapsed.as_secs_f64(),
        elapsed,
        published,
        p50: quantile(0.50, &before, &after),
        p99: quantile(0.99, &before, &after),
        cpu,
        transactions,
        mean_group: grouped / transactions.max(1) as f64,
        fallbacks: fallbacks.get() - fallbacks_before,
        commit_group: config.bus.commit_group,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_buckets() {
        let before = vec![(0.001, 0), (0.01, 0), (f64::INFINITY, 0)];
        let after = vec![(0.001, 50), (0.01, 100), (f64::INFINITY, 100)];
        assert!((quantile(0.5, &before, &after) - 0.001).abs() < 1e-9);
        assert!((quantile(0.75, &before, &after) - 0.0055).abs() < 1e-9);
        assert_eq!(fake_vector("a", 8), fake_vector("a", 8));
        assert_ne!(fake_vector("a", 8), fake_vector("b", 8));
    }
}
