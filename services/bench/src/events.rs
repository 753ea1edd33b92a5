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

use std::collections::HashMap;
use std::time::{Duration, Instant};

use clap::Args;
use hermes_config::Config;
use hermes_db::event_hub::EventHub;
use hermes_db::events::{self, Cursor, EventKind, Filter};
use hermes_db::scratch::ScratchDb;
use secrecy::ExposeSecret;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use hermes::{Listeners, Service};

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

/// Latencies in microseconds.
#[derive(Default)]
struct Sample(Vec<u64>);

impl Sample {
    fn pct(&self, p: f64) -> f64 {
        let mut v = self.0.clone();
        v.sort_unstable();
        let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
        v[i] as f64 / 1000.0
    }
}

pub async fn events(config: Config, args: EventsBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.rounds > 0 && args.messages >= args.rounds,
        "at least one message a round"
    );
    let id = &uuid::Uuid::now_v7().simple().to_string()[20..];
    let ns = format!("evbench{id}");
    let scratch = ScratchDb::create(&config.database_url, "hermes_evbench").await?;
    eprintln!("events: database {}, namespace {ns}", scratch.name());
    let fleet_config = bench_config(&config, &ns, &scratch)?;
    // The fleet's bus settings exactly: the broker refuses a queue declared otherwise.
    let settings = fleet_config.bus.clone();
    let result = run(fleet_config, &args, &scratch).await;
    // The database goes whatever the broker says.
    crate::delete_namespace("events", &config.amqp_url, &ns, settings).await?;
    scratch.drop_now().await?;
    result
}

/// The run's configuration: the machine's, on the scratch database and namespace, with the
/// Telegram webhook on and no inbound limit.
fn bench_config(config: &Config, ns: &str, scratch: &ScratchDb) -> anyhow::Result<Config> {
    let vars: HashMap<&str, String> = [
        ("DATABASE_URL", scratch.url.expose_secret().to_string()),
        ("REDIS_URL", config.redis_url.expose_secret().to_string()),
        ("AMQP_URL", config.amqp_url.expose_secret().to_string()),
        ("HERMES_NAMESPACE", ns.to_string()),
        // The listeners are this process's own (loopback, free ports).
        ("HERMES_HTTP_ADDR", "127.0.0.1:0".to_string()),
        ("HERMES_ADMIN_ADDR", "127.0.0.1:0".to_string()),
        ("TELEGRAM_WEBHOOK_SECRET", TG_SECRET.to_string()),
        ("HERMES_INBOUND_PER_MINUTE", "10000000".to_string()),
        ("HERMES_INBOUND_BURST", "10000000".to_string()),
        // The model is never called: no llm stage runs, its queue is deleted at the end.
        ("HERMES_PROVIDER", "openai".to_string()),
        ("OPENAI_API_KEY", "unused".to_string()),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9".to_string()),
        ("HERMES_LOG_FORMAT", "json".to_string()),
        // Should the deletion at the end fail, the namespace's queues go by themselves.
        ("HERMES_QUEUE_EXPIRES_SECS", "900".to_string()),
    ]
    .into_iter()
    .collect();
    Config::from_lookup(&move |k| vars.get(k).cloned(), None)
        .map_err(|e| anyhow::anyhow!("bench configuration: {e}"))
}

async fn run(fleet_config: Config, args: &EventsBench, scratch: &ScratchDb) -> anyhow::Result<()> {
    seed(&scratch.db).await?;
    let http = TcpListener::bind("127.0.0.1:0").await?;
    let admin = TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", http.local_addr()?);
    let ready = format!("http://{}/readyz", admin.local_addr()?);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let fleet = tokio::spawn(async move {
        hermes::run(
            fleet_config,
            &[Service::Ingest, Service::Router],
            Listeners {
                http: Some(http),
                admin: Some(admin),
            },
            async {
                let _ = stop_rx.await;
            },
        )
        .await
    });
    let client = reqwest::Client::new();
    let started = Instant::now();
    while !client
        .get(&ready)
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        if fleet.is_finished() {
            fleet.await??;
            anyhow::bail!("the fleet stopped while starting");
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(30),
            "not ready in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stop = CancellationToken::new();
    let (hub, listener) = EventHub::start(&scratch.db, stop.clone());
    anyhow::ensure!(hub.ready(Duration::from_secs(10)).await, "no LISTEN");

    let post = Poster {
        client,
        url: format!("{base}/webhooks/telegram"),
    };
    let (mut path, mut baseline) = (Sample::default(), Sample::default());
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
    let _ = stop_tx.send(());
    fleet.await??;
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
    use hermes_db::users;
    let mut client = db.get().await?;
    let tx = client.transaction().await?;
    let user = users::create(
        &tx,
        &users::NewUser {
            workspace: "default",
            display_name: Some("bench"),
            tier: hermes_types::model::Tier::Free,
            credits: 1_000_000,
        },
    )
    .await?;
    tx.commit().await?;
    let scope = users::ChannelScope {
        platform: hermes_types::model::Platform::Telegram,
        api_key: None,
    };
    users::link_channel(&client, user.id, scope, &SENDER.to_string(), true, None).await?;
    Ok(())
}
