//! `hermes bench llm`: the llm gateway alone, in this process, at a fixed call rate against
//! a zero-latency fake OpenAI-compatible provider on localhost, with the real Redis. Every
//! call takes the production path: killswitch and global cap, hops, response cache (unique
//! prompts, so a miss and a store), a per-user budget reservation and settlement, a call
//! slot, the wire encoding and decoding, pricing and spend. It reports the gateway's own
//! overhead (time in the gateway minus the slot wait and the provider round trip) at
//! p50/p99/max, the achieved rate, and the process's memory every `--report-every` seconds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::post;
use clap::Args;
use hermes_cache::Cache;
use hermes_config::{BackendKind, Config, ModelSpec, Price};
use hermes_gateway::Gateway;
use hermes_gateway::backends::Backends;
use hermes_telemetry::Metrics;
use hermes_types::ids::UserId;
use hermes_types::model::{ChatMessage, LlmRequest, Platform, ReplyTo, Role, Tier};
use serde_json::{Value, json};

use crate::procstat::memory;

#[derive(Args, Debug)]
pub struct LlmBench {
    /// Calls per second to offer.
    #[arg(long, default_value_t = 1_000)]
    rate: u32,
    /// Seconds to run (600 shows whether memory stays flat under constant load).
    #[arg(long, default_value_t = 20)]
    duration: u64,
    /// Distinct users whose budgets are reserved and settled.
    #[arg(long, default_value_t = 1_000)]
    users: u32,
    /// Print memory and the rate so far this often (seconds).
    #[arg(long, default_value_t = 10)]
    report_every: u64,
}

/// The fake provider: answers every chat completion at once.
async fn fake_provider() -> anyhow::Result<String> {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        post(|Json(_): Json<Value>| async {
            Json(json!({
                "id": "chatcmpl-bench", "object": "chat.completion", "model": "bench",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "Sure — here you go."},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 120, "completion_tokens": 8, "total_tokens": 128}
            }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}/v1"))
}

fn request(i: u64) -> LlmRequest {
    LlmRequest::new(
        ReplyTo {
            platform: Platform::Api,
            chat_id: "bench".into(),
            callback_url: None,
            quote: None,
            interaction: None,
        },
        Tier::Free,
        vec!["bench".into()],
        vec![
            ChatMessage::text(
                Role::System,
                "You are Mizu, a friendly assistant. Keep answers short.",
            ),
            ChatMessage::text(Role::User, format!("bench question number {i}: what's on?")),
        ],
    )
}

/// Microsecond samples in 1 µs buckets up to 100 ms (beyond: the last bucket), allocated
/// and touched once.
struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    max: u32,
}

impl Histogram {
    const BUCKETS: usize = 100_000;

    fn new() -> Self {
        Self {
            buckets: vec![0; Self::BUCKETS],
            count: 0,
            max: 0,
        }
    }

    fn record(&mut self, micros: u32) {
        self.buckets[(micros as usize).min(Self::BUCKETS - 1)] += 1;
        self.count += 1;
        self.max = self.max.max(micros);
    }

    /// The `q` quantile in milliseconds.
    fn quantile_ms(&self, q: f64) -> f64 {
        let rank = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (micros, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return micros as f64 / 1000.0;
            }
        }
        f64::from(self.max) / 1000.0
    }
}

pub async fn llm(mut config: Config, args: LlmBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.rate > 0 && args.duration > 0 && args.users > 0,
        "--rate, --duration and --users must be above 0"
    );
    let base = fake_provider().await?;
    // A private namespace so budgets and cache entries never touch a real install's.
    let ns = format!("bench_{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
    config.namespace = hermes_config::Namespace::parse(&ns).map_err(anyhow::Error::msg)?;
    config.llm.provider.forced = Some(BackendKind::Ollama);
    config
        .llm
        .provider
        .base_urls
        .insert(BackendKind::Ollama, base.parse()?);
    config.models.insert(
        "bench".into(),
        ModelSpec {
            id: "bench".into(),
            backend: Some(BackendKind::Ollama),
            max_output_tokens: 256,
            input_price: Price(800_000),
            output_price: Price(4_000_000),
        },
    );
    config.llm.max_concurrent = 256;
    config.llm.budgets.insert(
        Tier::Free,
        hermes_config::TierBudget {
            daily_tokens: u64::MAX / 4,
            monthly_tokens: u64::MAX / 4,
        },
    );
    let config = Arc::new(config);
    let metrics = Metrics::new();
    let cache = Cache::new(&config.redis_url, config.namespace.clone(), metrics.clone())?;
    let backends = Backends::new(config.clone(), None)?;
    let gateway = Gateway::with_parts(
        config.clone(),
        metrics.clone(),
        backends,
        cache.clone(),
        None,
    );
    let users: Arc<Vec<UserId>> = Arc::new((0..args.users).map(|_| UserId::new()).collect());

    // Warm up connections (HTTP pool, Redis) before measuring.
    for i in 0..200u64 {
        gateway
            .complete(&request(u64::MAX - i), Some(users[0]), None)
            .await?;
    }

    let pid = std::process::id();
    println!(
        "llm gateway: {} calls/s for {} s, {} users, zero-latency fake provider; {}",
        args.rate,
        args.duration,
        args.users,
        memory(pid).unwrap_or_default()
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u32, u32, bool)>();
    let interval = Duration::from_secs_f64(1.0 / f64::from(args.rate));
    let total = u64::from(args.rate) * args.duration;
    let started = Instant::now();
    // Fixed-size histograms (filled at start), so the bench's own memory stays flat and the
    // reported RSS shows the gateway's.
    let collector = tokio::spawn(async move {
        let mut overhead = Histogram::new();
        let mut whole = Histogram::new();
        let mut failed = 0u64;
        while let Some((o, w, ok)) = rx.recv().await {
            if ok {
                overhead.record(o);
                whole.record(w);
            } else {
                failed += 1;
            }
        }
        (overhead, whole, failed)
    });
    let mut next_report = Duration::from_secs(args.report_every);
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    for i in 0..total {
        ticker.tick().await;
        let g = gateway.clone();
        let tx = tx.clone();
        let user = users[(i % u64::from(args.users)) as usize];
        tokio::spawn(async move {
            let t = Instant::now();
            let r = g.complete(&request(i), Some(user), None).await;
            let whole = t.elapsed().as_micros() as u32;
            let _ = match r {
                Ok(s) => tx.send((s.overhead.as_micros() as u32, whole, true)),
                Err(e) => {
                    tracing::warn!(error = %e, "bench call failed");
                    tx.send((0, whole, false))
                }
            };
        });
        if started.elapsed() >= next_report {
            println!(
                "  {:>4} s: {} calls offered; {}",
                next_report.as_secs(),
                i + 1,
                memory(pid).unwrap_or_default()
            );
            next_report += Duration::from_secs(args.report_every);
        }
    }
    drop(tx);
    let (overhead, whole, failed) = collector.await?;
    let elapsed = started.elapsed();
    println!(
        "calls: {} answered, {failed} failed in {:.1} s ({:.0} calls/s)",
        overhead.count,
        elapsed.as_secs_f64(),
        overhead.count as f64 / elapsed.as_secs_f64()
    );
    println!(
        "gateway overhead: p50 {:.3} ms, p99 {:.3} ms, p99.9 {:.3} ms, max {:.3} ms",
        overhead.quantile_ms(0.50),
        overhead.quantile_ms(0.99),
        overhead.quantile_ms(0.999),
        f64::from(overhead.max) / 1000.0
    );
    println!(
        "whole call (incl. the localhost round trip): p50 {:.3} ms, p99 {:.3} ms",
        whole.quantile_ms(0.50),
        whole.quantile_ms(0.99)
    );
    println!("memory at the end: {}", memory(pid).unwrap_or_default());
    // Leave nothing behind in Redis.
    let mut c = cache.conn();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{ns}:*"))
        .query_async(&mut c)
        .await
        .unwrap_or_default();
    for chunk in keys.chunks(500) {
        let _: Result<(), _> = redis::cmd("DEL").arg(chunk).query_async(&mut c).await;
    }
    Ok(())
}
