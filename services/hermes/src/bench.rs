//! `hermes bench ingest`: an open-loop load generator for a running ingest. It sends signed
//! WhatsApp Cloud API webhooks at a fixed rate (each a new message from one of many
//! senders), whatever the answers, and reports what was accepted and how fast.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use tokio::sync::Mutex;

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
        delivery_limit: 5,
        publish_window: 1,
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

fn body(i: u64, senders: u32, run: &str) -> Vec<u8> {
    let sender = 15_550_000_000u64 + (i % u64::from(senders));
    let now = chrono::Utc::now().timestamp();
    format!(
        r#"{{"object":"whatsapp_business_account","entry":[{{"id":"BENCH","changes":[{{"field":"messages","value":{{"messaging_product":"whatsapp","metadata":{{"display_phone_number":"15550000000","phone_number_id":"BENCH_PHONE"}},"contacts":[{{"profile":{{"name":"Bench"}},"wa_id":"{sender}"}}],"messages":[{{"from":"{sender}","id":"wamid.bench.{run}.{i}","timestamp":"{now}","type":"text","text":{{"body":"load test message {i}"}}}}]}}}}]}}]}}"#
    )
    .into_bytes()
}

/// VmRSS and VmHWM of a process, from /proc.
pub(crate) fn memory(pid: u32) -> Option<String> {
    let r = crate::procstat::read(pid)?;
    Some(format!(
        "VmRSS {} kB (peak VmHWM {} kB)",
        r.rss_kib, r.peak_kib
    ))
}

/// CPU time spent on this machine, from /proc: the whole machine's busy time (user, system,
/// interrupts; not idle, I/O wait or steal) and one process's, in clock ticks. Throughput on a
/// shared two-core machine moves with its neighbours; CPU time per message does much less, so
/// the benches report both.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuTicks {
    machine: u64,
    process: Option<u64>,
}

impl CpuTicks {
    pub(crate) fn now(pid: Option<u32>) -> Self {
        Self {
            machine: crate::procstat::machine_busy_ticks().unwrap_or(0),
            process: pid.and_then(crate::procstat::process_ticks),
        }
    }

    /// Milliseconds of CPU per item since `before`: (machine, process).
    pub(crate) fn per_item(self, before: Self, items: u64) -> (f64, Option<f64>) {
        let ms = |ticks: u64| crate::procstat::ticks_to_ms(ticks) / items.max(1) as f64;
        (
            ms(self.machine.saturating_sub(before.machine)),
            self.process
                .zip(before.process)
                .map(|(a, b)| ms(a.saturating_sub(b))),
        )
    }
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

pub async fn ingest(args: IngestBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.rate > 0 && args.duration > 0,
        "--rate and --duration must be above 0"
    );
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.connections)
        .timeout(Duration::from_secs(10))
        .build()?;
    let url = format!("{}/webhooks/whatsapp", args.url.trim_end_matches('/'));
    let run = uuid::Uuid::now_v7().simple().to_string()[20..].to_string();
    // (second of the run the request was due in, latency in µs) of every accepted request.
    let latencies = Arc::new(Mutex::new(Vec::<(u32, u32)>::with_capacity(
        (args.rate as u64 * args.duration) as usize,
    )));
    let statuses = Arc::new(Mutex::new(std::collections::BTreeMap::<String, u64>::new()));
    let in_flight = Arc::new(tokio::sync::Semaphore::new(args.max_in_flight));
    let connections = Arc::new(tokio::sync::Semaphore::new(args.connections.max(1)));
    let total = u64::from(args.rate) * args.duration;
    let interval = Duration::from_secs_f64(1.0 / f64::from(args.rate));
    println!(
        "sending {total} signed WhatsApp webhooks to {url} at {}/s for {}s over {} senders and {} connections",
        args.rate, args.duration, args.senders, args.connections
    );
    let stop_drain = tokio_util::sync::CancellationToken::new();
    let drainer = match &args.drain {
        Some(ns) => {
            let expires = args.queue_expires_secs.map(Duration::from_secs);
            Some(drain(ns, &args.amqp_url, expires, stop_drain.clone()).await?)
        }
        None => None,
    };
    // Every body and its signature is made before the clock starts: the generator shares the
    // two cores with ingest, and its own work should not be measured as ingest's.
    let requests: Vec<(bytes::Bytes, String)> = (0..total)
        .map(|i| {
            let body = body(i, args.senders, &run);
            let sig = hermes_ingest::channels::verify::sign_hub(args.secret.as_bytes(), &body);
            (bytes::Bytes::from(body), sig)
        })
        .collect();
    let cpu_before = CpuTicks::now(args.pid);
    let own_before = CpuTicks::now(Some(std::process::id()));
    let started = Instant::now();
    let mut dropped = 0u64;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..total {
        // Open loop: send at the scheduled instant, not when the previous answer came back.
        let due = started + interval.mul_f64(i as f64);
        tokio::time::sleep_until(due.into()).await;
        let Ok(permit) = in_flight.clone().try_acquire_owned() else {
            dropped += 1;
            continue;
        };
        let (body, sig) = requests[i as usize].clone();
        let (http, url, latencies, statuses, connections) = (
            http.clone(),
            url.clone(),
            latencies.clone(),
            statuses.clone(),
            connections.clone(),
        );
        let rate = args.rate;
        tasks.spawn(async move {
            // Open loop without coordinated omission: the clock runs from the due instant.
            let t = due;
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
            let micros = t.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
            let label = match outcome {
                Ok(r) => r.status().as_u16().to_string(),
                Err(e) if e.is_timeout() => "timeout".into(),
                Err(_) => "connection_error".into(),
            };
            if label == "200" {
                let second = u32::try_from(i / u64::from(rate)).unwrap_or(u32::MAX);
                latencies.lock().await.push((second, micros));
            }
            *statuses.lock().await.entry(label).or_default() += 1;
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    }
    let send_secs = started.elapsed().as_secs_f64();
    while tasks.join_next().await.is_some() {}
    let cpu_after = CpuTicks::now(args.pid);
    let own_after = CpuTicks::now(Some(std::process::id()));
    stop_drain.cancel();
    if let Some(d) = drainer {
        let _ = d.await;
    }
    let samples = latencies.lock().await.clone();
    let mut lat: Vec<u32> = samples.iter().map(|&(_, l)| l).collect();
    lat.sort_unstable();
    let slow = slow_seconds(&samples);
    let accepted = lat.len() as u64;
    println!(
        "sent for {send_secs:.1}s; answers by status: {:?}; dropped (over --max-in-flight): {dropped}",
        statuses.lock().await
    );
    println!(
        "accepted {accepted} = {:.0}/s; accept latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        accepted as f64 / send_secs,
        pct(&lat, 0.50),
        pct(&lat, 0.99),
        lat.last().map(|v| f64::from(*v) / 1000.0).unwrap_or(0.0)
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
    fn cpu_ticks_become_milliseconds_per_item() {
        let before = CpuTicks {
            machine: 1_000,
            process: Some(100),
        };
        let after = CpuTicks {
            machine: 1_300,
            process: Some(160),
        };
        // 300 ticks of 10 ms over 1,000 items: 3 ms each; 60 ticks: 0.6 ms.
        let (machine, process) = after.per_item(before, 1_000);
        assert!((machine - 3.0).abs() < 1e-9);
        assert!((process.unwrap() - 0.6).abs() < 1e-9);
        assert!(CpuTicks::now(Some(std::process::id())).process.is_some());
    }
}
