//! `hermes bench ingest`: an open-loop load generator for a running ingest. It sends signed
//! WhatsApp Cloud API webhooks at a fixed rate (each a new message from one of many
//! senders), whatever the answers, and reports what was accepted and how fast.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use tokio::sync::Mutex;

use crate::procstat::{CpuTicks, memory};

mod floor;
mod rounds;

#[derive(Args, Debug)]
pub struct IngestBench {
    /// Base URL of the ingest under test.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// WHATSAPP_APP_SECRET of that ingest (the webhooks are signed with it).
    #[arg(long, env = "WHATSAPP_APP_SECRET", hide_env_values = true)]
    secret: String,
    /// Webhooks per second to send.
    #[arg(long, default_value_t = 3000)]
    rate: u32,
    /// Seconds to send for.
    #[arg(long, default_value_t = 30)]
    duration: u64,
    /// Distinct senders to spread the messages over (each has its own inbound rate limit).
    #[arg(long, default_value_t = 100_000)]
    senders: u32,
    /// HTTP connections kept open to ingest, as a load balancer's upstream pool or a platform's
    /// webhook sender would: a request waits for a free connection, and that wait counts in its
    /// latency (measured from the instant it was due, not from when it was sent).
    #[arg(long, default_value_t = 128)]
    connections: usize,
    /// Upper bound of requests outstanding, sent or waiting for a connection (beyond it a send
    /// is counted as dropped).
    #[arg(long, default_value_t = 2048)]
    max_in_flight: usize,
    /// Process id of the ingest, to report its memory (VmRSS and peak VmHWM).
    #[arg(long)]
    pid: Option<u32>,
    /// Consume (and ack) what ingest publishes to `{ns}.router` of this namespace, as the
    /// router would, so the broker is measured in steady state instead of with a growing backlog.
    #[arg(long, value_name = "NAMESPACE")]
    drain: Option<String>,
    /// The ingest's HERMES_QUEUE_EXPIRES_SECS (the drainer declares the same topology).
    #[arg(long, env = "HERMES_QUEUE_EXPIRES_SECS")]
    queue_expires_secs: Option<u64>,
    /// The broker to drain from.
    #[arg(
        long,
        env = "AMQP_URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f",
        hide_env_values = true
    )]
    amqp_url: String,
    /// Alternate ingest with its floor (a raw publish-with-confirm of the envelope's size into
    /// a throwaway quorum queue), `--rounds` times, and print each one's frontier, the ratios
    /// and ingest's memory, medians of the rounds (docs/performance.md, Ingest).
    #[arg(long)]
    with_floor: bool,
    /// Measure the floor alone (no ingest needed): its frontier and p99 at half of it.
    #[arg(long, conflicts_with = "with_floor")]
    floor_only: bool,
    /// Rounds of `--with-floor` / `--floor-only`.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The frontier: the highest rate whose step is all accepted with p99 within this (ms).
    #[arg(long, default_value_t = 15.0)]
    p99_bound_ms: f64,
    /// The frontier search starts here (per second) and doubles while the bound holds.
    #[arg(long, default_value_t = 250.0)]
    start_rate: f64,
    /// The frontier search never goes above this rate.
    #[arg(long, default_value_t = 16_000.0)]
    max_rate: f64,
    /// Seconds of each frontier step (`--duration` is the measurement at half the floor's
    /// frontier).
    #[arg(long, default_value_t = 3.0)]
    step_secs: f64,
    /// Publishes awaiting confirms at once on the floor's channel, as the bus's window.
    #[arg(long, env = "HERMES_PUBLISH_WINDOW", default_value_t = 512)]
    publish_window: usize,
}

/// Take everything arriving on the namespace's router queue until `stop`. It consumes in
/// no-ack mode: the drain stands in for a router elsewhere, so it should cost the broker and
/// this machine's two cores as little as possible.
async fn drain(
    ns: &str,
    amqp_url: &str,
    queue_expires: Option<Duration>,
    stop: tokio_util::sync::CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    use futures_util::StreamExt;
    use hermes_bus::{Bus, Names, Stage};
    use hermes_config::{BusSettings, Namespace};
    let names = Names::new(Namespace::parse(ns).map_err(anyhow::Error::msg)?);
    let queue = names.queue(Stage::Router);
    let settings = BusSettings {
        prefetch: 512,
        commit_group: 1,
        mark_gather: Duration::from_millis(50),
        delivery_limit: 5,
        publish_window: 1,
        frame_max: 16_384,
        reconnect_timeout: Duration::from_secs(10),
        queue_expires,
        retry_delays: Vec::new(),
        inbound_delay: Duration::from_secs(30),
        publish_timeout: Duration::from_secs(10),
        wait_queue_max_length: 100_000,
    };
    let bus = Bus::connect(
        amqp_url.to_string().into(),
        names,
        settings,
        hermes_telemetry::Metrics::new(),
    )
    .await?;
    let channel = bus.channel().await?;
    let mut consumer = channel
        .basic_consume(
            queue.as_str().into(),
            "hermes-bench-drain".into(),
            lapin::options::BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await?;
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                next = consumer.next() => if next.is_none() { break },
            }
        }
        let _ = channel.close(200, "bench done".into()).await;
        bus.close().await;
    }))
}

pub(crate) fn body(i: u64, senders: u32, run: &str) -> Vec<u8> {
    let sender = 15_550_000_000u64 + (i % u64::from(senders));
    let now = chrono::Utc::now().timestamp();
    format!(
        r#"{{"object":"whatsapp_business_account","entry":[{{"id":"BENCH","changes":[{{"field":"messages","value":{{"messaging_product":"whatsapp","metadata":{{"display_phone_number":"15550000000","phone_number_id":"BENCH_PHONE"}},"contacts":[{{"profile":{{"name":"Bench"}},"wa_id":"{sender}"}}],"messages":[{{"from":"{sender}","id":"wamid.bench.{run}.{i}","timestamp":"{now}","type":"text","text":{{"body":"load test message {i}"}}}}]}}}}]}}]}}"#
    )
    .into_bytes()
}

/// The seconds of the run whose own p99 went over 15 ms, with that p99: a tail made of a few
/// stalls looks different from one spread over the whole run.
fn slow_seconds(samples: &[(u32, u32)]) -> Vec<(u32, f64)> {
    let mut by_second = std::collections::BTreeMap::<u32, Vec<u32>>::new();
    for &(second, micros) in samples {
        by_second.entry(second).or_default().push(micros);
    }
    by_second
        .into_iter()
        .filter_map(|(second, mut l)| {
            l.sort_unstable();
            let p99 = pct(&l, 0.99);
            (p99 > 15.0).then_some((second, p99))
        })
        .collect()
}

/// The `p` quantile of sorted microseconds, in milliseconds.
pub(crate) fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[idx]) / 1000.0
}

/// One open-loop step's figures: what was sent, what was accepted (answered 200, or
/// confirmed by the broker for the floor) and its latency from each send's due instant.
#[derive(Debug, Clone, Default)]
pub(crate) struct Step {
    pub sent: u64,
    pub accepted: u64,
    pub dropped: u64,
    /// Seconds the sending took (the schedule's length, unless the sender fell behind).
    pub secs: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Step {
    /// The figures of `sent` sends of which `sorted` (µs, ascending) were accepted.
    pub(crate) fn of(sent: u64, dropped: u64, sorted: Vec<u32>, secs: f64) -> Self {
        Self {
            sent,
            accepted: sorted.len() as u64,
            dropped,
            secs,
            p50_ms: pct(&sorted, 0.50),
            p99_ms: pct(&sorted, 0.99),
            max_ms: sorted.last().map_or(0.0, |v| f64::from(*v) / 1000.0),
        }
    }

    /// Accepted per second.
    pub(crate) fn rate(&self) -> f64 {
        self.accepted as f64 / self.secs.max(1e-9)
    }

    /// Every send accepted, with p99 within `bound_ms`.
    pub(crate) fn holds(&self, bound_ms: f64) -> bool {
        self.sent > 0 && self.accepted == self.sent && self.p99_ms <= bound_ms
    }
}

/// What one burst of webhooks gave: every accepted request's (second, latency in µs), the
/// answers by status, and the step's figures.
pub(crate) struct Sent {
    samples: Vec<(u32, u32)>,
    statuses: std::collections::BTreeMap<String, u64>,
    step: Step,
}

/// The generator's side of ingest: signed webhooks sent open loop over a connection pool.
pub(crate) struct Webhooks {
    http: reqwest::Client,
    url: String,
    secret: String,
    senders: u32,
    connections: usize,
    max_in_flight: usize,
}

impl Webhooks {
    fn new(args: &IngestBench) -> anyhow::Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(args.connections)
                .timeout(Duration::from_secs(10))
                .build()?,
            url: format!("{}/webhooks/whatsapp", args.url.trim_end_matches('/')),
            secret: args.secret.clone(),
            senders: args.senders,
            connections: args.connections.max(1),
            max_in_flight: args.max_in_flight,
        })
    }

    /// Send `rate` webhooks a second for `secs` seconds, whatever the answers.
    pub(crate) async fn send(&self, rate: f64, secs: f64) -> Sent {
        let run = uuid::Uuid::now_v7().simple().to_string()[20..].to_string();
        let total = (rate * secs).round().max(1.0) as u64;
        let per_second = rate.max(1.0) as u64;
        // (second of the run the request was due in, latency in µs) of every accepted request.
        let latencies = Arc::new(Mutex::new(Vec::<(u32, u32)>::with_capacity(total as usize)));
        let statuses = Arc::new(Mutex::new(std::collections::BTreeMap::<String, u64>::new()));
        let connections = Arc::new(tokio::sync::Semaphore::new(self.connections));
        // Every body and its signature is made before the clock starts: the generator shares the
        // two cores with ingest, and its own work should not be measured as ingest's.
        let requests: Vec<(bytes::Bytes, String)> = (0..total)
            .map(|i| {
                let body = body(i, self.senders, &run);
                let sig = hermes_channels::meta::verify::sign_hub(self.secret.as_bytes(), &body);
                (bytes::Bytes::from(body), sig)
            })
            .collect();
        let (dropped, send_secs) = open_loop(rate, total, self.max_in_flight, |i, due| {
            let (body, sig) = requests[i as usize].clone();
            let (http, url, latencies, statuses, connections) = (
                self.http.clone(),
                self.url.clone(),
                latencies.clone(),
                statuses.clone(),
                connections.clone(),
            );
            async move {
                let Ok(_connection) = connections.acquire_owned().await else {
                    return;
                };
                let outcome = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("x-hub-signature-256", sig)
                    .body(body)
                    .send()
                    .await;
                let micros = due.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                let label = match outcome {
                    Ok(r) => r.status().as_u16().to_string(),
                    Err(e) if e.is_timeout() => "timeout".into(),
                    Err(_) => "connection_error".into(),
                };
                if label == "200" {
                    let second = u32::try_from(i / per_second).unwrap_or(u32::MAX);
                    latencies.lock().await.push((second, micros));
                }
                *statuses.lock().await.entry(label).or_default() += 1;
            }
        })
        .await;
        let samples = std::mem::take(&mut *latencies.lock().await);
        let mut lat: Vec<u32> = samples.iter().map(|&(_, l)| l).collect();
        lat.sort_unstable();
        let statuses = std::mem::take(&mut *statuses.lock().await);
        Sent {
            samples,
            statuses,
            step: Step::of(total, dropped, lat, send_secs),
        }
    }
}

/// Start `send(i, due)` for each of `total` sends at its due instant on a schedule of `rate`
/// a second, whatever the earlier sends are doing (open loop: each latency counts from `due`,
/// so there is no coordinated omission), with at most `max_in_flight` outstanding (beyond it a
/// send is dropped). Returns (dropped, seconds the schedule took) once every send ended.
pub(crate) async fn open_loop<F, Fut>(
    rate: f64,
    total: u64,
    max_in_flight: usize,
    mut send: F,
) -> (u64, f64)
where
    F: FnMut(u64, Instant) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let interval = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let in_flight = Arc::new(tokio::sync::Semaphore::new(max_in_flight.max(1)));
    let mut dropped = 0u64;
    let mut tasks = tokio::task::JoinSet::new();
    let started = Instant::now();
    for i in 0..total {
        let due = started + interval.mul_f64(i as f64);
        tokio::time::sleep_until(due.into()).await;
        let Ok(permit) = in_flight.clone().try_acquire_owned() else {
            dropped += 1;
            continue;
        };
        let sending = send(i, due);
        tasks.spawn(async move {
            sending.await;
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    }
    let secs = started.elapsed().as_secs_f64();
    while tasks.join_next().await.is_some() {}
    (dropped, secs)
}

/// The envelope JSON ingest publishes for one of this bench's webhooks, in bytes: the body of
/// the floor's raw publishes.
pub(crate) fn envelope_len(senders: u32) -> anyhow::Result<usize> {
    use hermes_types::envelope::Envelope;
    use hermes_types::model::Inbound;
    let batch = hermes_channels::whatsapp::parse(&body(0, senders, "000000000000"))
        .map_err(|e| anyhow::anyhow!("the bench's own webhook does not parse: {e:?}"))?;
    let event = batch
        .messages
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("the bench's own webhook holds no message"))?;
    let env = Envelope::new(
        hermes_types::ids::RunId::new(),
        Some(hermes_types::trace::TraceParent::generate()),
        &Inbound::of(event),
    );
    Ok(hermes_types::stage::Outgoing::from_envelope(&env)
        .body
        .len())
}

pub async fn ingest(args: IngestBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.rate > 0 && args.duration > 0,
        "--rate and --duration must be above 0"
    );
    if args.with_floor || args.floor_only {
        return rounds::run(&args).await;
    }
    let webhooks = Webhooks::new(&args)?;
    println!(
        "sending {} signed WhatsApp webhooks to {} at {}/s for {}s over {} senders and {} connections",
        u64::from(args.rate) * args.duration,
        webhooks.url,
        args.rate,
        args.duration,
        args.senders,
        args.connections
    );
    let stop_drain = tokio_util::sync::CancellationToken::new();
    let drainer = match &args.drain {
        Some(ns) => {
            let expires = args.queue_expires_secs.map(Duration::from_secs);
            Some(drain(ns, &args.amqp_url, expires, stop_drain.clone()).await?)
        }
        None => None,
    };
    let cpu_before = CpuTicks::now(args.pid);
    let own_before = CpuTicks::now(Some(std::process::id()));
    let sent = webhooks
        .send(f64::from(args.rate), args.duration as f64)
        .await;
    let cpu_after = CpuTicks::now(args.pid);
    let own_after = CpuTicks::now(Some(std::process::id()));
    stop_drain.cancel();
    if let Some(d) = drainer {
        let _ = d.await;
    }
    let step = &sent.step;
    let slow = slow_seconds(&sent.samples);
    let accepted = step.accepted;
    println!(
        "sent for {:.1}s; answers by status: {:?}; dropped (over --max-in-flight): {}",
        step.secs, sent.statuses, step.dropped
    );
    println!(
        "accepted {accepted} = {:.0}/s; accept latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        step.rate(),
        step.p50_ms,
        step.p99_ms,
        step.max_ms
    );
    if !slow.is_empty() {
        println!(
            "seconds whose p99 was over 15 ms ({} of {}): {}",
            slow.len(),
            args.duration,
            slow.iter()
                .map(|(s, p99)| format!("{s}s {p99:.0} ms"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let (machine, ingest) = cpu_after.per_item(cpu_before, accepted);
    let generator = own_after.per_item(own_before, accepted).1.unwrap_or(0.0);
    match ingest {
        Some(ingest) => println!(
            "CPU per accepted webhook: {machine:.3} ms on the whole machine (ingest {ingest:.3} ms, this generator {generator:.3} ms; the rest is the broker and Redis)"
        ),
        None => println!(
            "CPU per accepted webhook: {machine:.3} ms on the whole machine (this generator {generator:.3} ms)"
        ),
    }
    if let Some(pid) = args.pid {
        println!(
            "ingest memory: {}",
            memory(pid).unwrap_or_else(|| format!("process {pid} not found"))
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_seconds_are_those_whose_own_p99_passes_15_ms() {
        let mut samples: Vec<(u32, u32)> = (0..200).map(|_| (0, 2_000)).collect();
        samples.extend((0..200).map(|i| (1, if i < 10 { 40_000 } else { 2_000 })));
        samples.extend((0..200).map(|i| (2, if i < 1 { 90_000 } else { 3_000 })));
        let slow = slow_seconds(&samples);
        assert_eq!(slow.len(), 1, "{slow:?}");
        assert_eq!(slow[0], (1, 40.0));
    }

    #[test]
    fn a_step_holds_only_when_all_was_accepted_within_the_bound() {
        let step = Step::of(4, 0, vec![1_000, 2_000, 3_000, 9_000], 2.0);
        assert_eq!((step.accepted, step.rate()), (4, 2.0));
        assert_eq!((step.p99_ms, step.max_ms), (9.0, 9.0));
        assert!(step.holds(9.0) && !step.holds(8.0));
        assert!(!Step::of(5, 1, vec![1_000; 4], 1.0).holds(100.0));
        assert!(!Step::default().holds(100.0));
    }

    #[test]
    fn the_floor_publishes_the_size_of_the_envelope_ingest_would() {
        let len = envelope_len(100).unwrap();
        // The envelope carries the message and its ids, well beyond the text alone.
        assert!(len > "load test message 0".len(), "{len}");
    }
}
