//! `hermes bench events`: how long an operator's `events_wait` takes to return a message
//! after its Telegram webhook is posted (docs/performance.md, "Operator events"). Ingest
//! and the router run in this process on a throw-away database and namespace; each message
//! is posted to `/webhooks/telegram` while a wait on the event hub (what `events_wait`
//! calls) is pending from the log's head, and the time from the post to the wait's return
//! is recorded. The baseline, measured in the same run, is the webhook's own answer (its
//! `200`): what the event path adds is the router taking the message and the notification.
//! Rounds alternate the two, so drift touches both alike. The database, the namespace's
//! queues and exchanges are deleted at the end (Redis keys of the namespace expire: dedupe
//! ids in 24 h, rate buckets within a minute).

use std::time::{Duration, Instant};

use clap::Args;
use hermes_config::Config;
use hermes_db::event_hub::EventHub;
use hermes_db::events::{self, Cursor, EventKind, Filter};
use hermes_db::scratch::ScratchDb;
use tokio_util::sync::CancellationToken;

use hermes::Service;

use crate::in_process::{InProcess, Scratch, scratch_config};
use crate::stats::Latencies;

const TG_SECRET: &str = "bench-events-secret-0123456789";
const SENDER: i64 = 777_001;

#[derive(Args, Debug)]
pub struct EventsBench {
    /// Messages timed through the event path (and as many webhook answers as the baseline).
    #[arg(long, default_value_t = 1_000)]
    messages: usize,
    /// Rounds the two measurements alternate in.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

pub async fn events(config: Config, args: EventsBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.rounds > 0 && args.messages >= args.rounds,
        "at least one message a round"
    );
    let scratch = Scratch::create("events", "evbench", &config).await?;
    let fleet_config = bench_config(&config, &scratch.ns, &scratch.db)?;
    let settings = fleet_config.bus.clone();
    let result = run(fleet_config, &args, &scratch.db).await;
    scratch.remove("events", &config, settings).await?;
    result
}

/// The run's configuration: the machine's, on the scratch database and namespace, with the
/// Telegram webhook on and no inbound limit.
fn bench_config(config: &Config, ns: &str, scratch: &ScratchDb) -> anyhow::Result<Config> {
    scratch_config(
        config,
        ns,
        scratch,
        &[
            ("TELEGRAM_WEBHOOK_SECRET", TG_SECRET),
            ("HERMES_INBOUND_PER_MINUTE", "10000000"),
            ("HERMES_INBOUND_BURST", "10000000"),
            // The model is never called: no llm stage runs, its queue is deleted at the end.
            ("HERMES_PROVIDER", "openai"),
            ("OPENAI_API_KEY", "unused"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9"),
        ],
    )
}

async fn run(fleet_config: Config, args: &EventsBench, scratch: &ScratchDb) -> anyhow::Result<()> {
    seed(&scratch.db).await?;
    let fleet = InProcess::start(fleet_config, &[Service::Ingest, Service::Router]).await?;
    let base = fleet.base.clone();
    let client = reqwest::Client::new();
    let stop = CancellationToken::new();
    let (hub, listener) = EventHub::start(&scratch.db, stop.clone());
    anyhow::ensure!(hub.ready(Duration::from_secs(10)).await, "no LISTEN");

    let post = Poster {
        client,
        url: format!("{base}/webhooks/telegram"),
    };
    let (mut path, mut baseline) = (Latencies::default(), Latencies::default());
    let per_round = args.messages / args.rounds;
    let mut n = 0i64;
    for round in 0..args.rounds {
        for _ in 0..per_round {
            n += 1;
            path.0.push(through_events(&hub, &post, n).await?);
        }
        let from = events::head(&hub.db().get().await?).await?;
        for _ in 0..per_round {
            n += 1;
            let t = Instant::now();
            post.send(n).await?;
            baseline.0.push(t.elapsed().as_micros() as u64);
        }
        // The router's backlog of the baseline is drained before the next timed message.
        until_seen(&hub, from, n).await?;
        eprintln!("events: round {} of {} done", round + 1, args.rounds);
    }
    stop.cancel();
    listener.await?;
    fleet.stop().await?;
    println!(
        "events: {} messages a measurement, {} rounds alternated",
        path.0.len(),
        args.rounds
    );
    for (name, s) in [
        ("webhook -> events_wait", &path),
        ("webhook 200 (baseline)", &baseline),
    ] {
        println!(
            "{name:<24} p50 {:>7.2} ms  p99 {:>7.2} ms",
            s.pct(0.50),
            s.pct(0.99)
        );
    }
    Ok(())
}

/// Time message `n` from its webhook to the wait that returns it.
async fn through_events(hub: &EventHub, post: &Poster, n: i64) -> anyhow::Result<u64> {
    let head = events::head(&hub.db().get().await?).await?;
    let t = Instant::now();
    let wait = {
        let hub = hub.clone();
        tokio::spawn(async move { until_seen(&hub, head, n).await })
    };
    post.send(n).await?;
    wait.await??;
    Ok(t.elapsed().as_micros() as u64)
}

/// Wait from `from` until message `n`'s event is returned (skipping earlier messages'
/// events still arriving), as a client looping on `events_wait` does.
async fn until_seen(hub: &EventHub, mut from: Cursor, n: i64) -> anyhow::Result<()> {
    let want = serde_json::json!(format!("m{n}"));
    let filter = Filter {
        kinds: Some(vec![EventKind::Message]),
        ..Filter::default()
    };
    let give_up = Instant::now() + Duration::from_secs(60);
    let mut held_back = false;
    while Instant::now() < give_up {
        let page = hub
            .wait(from, &filter, 100, Duration::from_secs(30))
            .await?;
        if page.events.iter().any(|e| e.body["text"] == want) {
            return Ok(());
        }
        (from, held_back) = (page.next, page.held_back);
    }
    // Held back: a transaction older than the event still runs somewhere on the server
    // (any database), which the figures would measure instead of Hermes.
    anyhow::bail!("message {n} never showed as an event in 60 s (held back: {held_back})")
}

/// Posts Telegram updates from the bench's user.
struct Poster {
    client: reqwest::Client,
    url: String,
}

impl Poster {
    async fn send(&self, n: i64) -> anyhow::Result<()> {
        let update = serde_json::json!({
            "update_id": n,
            "message": {
                "message_id": n, "date": 1_760_000_000, "text": format!("m{n}"),
                "from": {"id": SENDER, "is_bot": false, "first_name": "Bench"},
                "chat": {"id": SENDER, "type": "private"},
            }
        });
        let resp = self
            .client
            .post(&self.url)
            .header("x-telegram-bot-api-secret-token", TG_SECRET)
            .json(&update)
            .send()
            .await?;
        anyhow::ensure!(resp.status().is_success(), "webhook {}", resp.status());
        Ok(())
    }
}

/// The bench's user, linked to its Telegram sender, with credits for every message.
async fn seed(db: &hermes_db::Db) -> anyhow::Result<()> {
    let telegram = (hermes_types::model::Platform::Telegram, SENDER.to_string());
    crate::seed::user(db, "bench", hermes_types::model::Tier::Free, &[telegram]).await?;
    Ok(())
}
