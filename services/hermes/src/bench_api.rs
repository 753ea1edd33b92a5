//! `hermes bench api`: the OpenAI-compatible API through a running fleet, each request
//! waiting for its answer (docs/performance.md, "Chat completions and responses"). For chat
//! completions and for responses, on the same run: the sustained rate (closed loop, a fixed
//! number of callers each sending its next request when the last was answered), then the
//! end-to-end latency at half that rate (open loop, timed from each request's due instant so
//! a slow answer is not hidden by the requests it delayed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::bench::{CpuTicks, pct};

#[derive(Args, Debug)]
pub struct ApiBench {
    /// Base URL of an ingest of the fleet under test.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The key to call with (`API_SERVER_KEY`, or a key with the `chat` scope).
    #[arg(long, env = "API_SERVER_KEY", hide_env_values = true)]
    key: String,
    /// Seconds of each phase (sustained rate, then latency), per endpoint.
    #[arg(long, default_value_t = 15)]
    duration: u64,
    /// Callers of the closed-loop phase.
    #[arg(long, default_value_t = 32)]
    callers: usize,
}

/// One endpoint measured.
#[derive(Clone, Copy)]
enum Endpoint {
    Chat,
    Responses,
}

impl Endpoint {
    fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Responses => "/v1/responses",
        }
    }

    fn body(self, i: u64) -> Value {
        let text = format!("bench message {i}");
        match self {
            Endpoint::Chat => json!({"messages": [{"role": "user", "content": text}]}),
            Endpoint::Responses => json!({"input": text}),
        }
    }
}

/// Answers by status, and the latency in µs of each 200.
#[derive(Default)]
struct Tally {
    statuses: std::collections::BTreeMap<String, u64>,
    latencies: Vec<u32>,
}

async fn send(http: &reqwest::Client, url: &str, key: &str, body: &Value) -> String {
    match http.post(url).bearer_auth(key).json(body).send().await {
        // The answer is read whole: the request is done when the caller has it.
        Ok(r) => {
            let status = r.status().as_u16().to_string();
            let _ = r.bytes().await;
            status
        }
        Err(e) if e.is_timeout() => "timeout".into(),
        Err(_) => "connection_error".into(),
    }
}

fn record(tally: &mut Tally, status: String, since: Instant) {
    if status == "200" {
        let micros = since.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
        tally.latencies.push(micros);
    }
    *tally.statuses.entry(status).or_default() += 1;
}

/// Closed loop: answered requests per second with `callers` callers.
async fn sustained(args: &ApiBench, http: &reqwest::Client, endpoint: Endpoint) -> (f64, Tally) {
    let url = format!("{}{}", args.url.trim_end_matches('/'), endpoint.path());
    let tally = Arc::new(Mutex::new(Tally::default()));
    let started = Instant::now();
    let until = started + Duration::from_secs(args.duration);
    let mut callers = tokio::task::JoinSet::new();
    for c in 0..args.callers {
        let (http, url, key, tally) = (http.clone(), url.clone(), args.key.clone(), tally.clone());
        callers.spawn(async move {
            let mut i = c as u64 * 1_000_000;
            while Instant::now() < until {
                let t = Instant::now();
                let status = send(&http, &url, &key, &endpoint.body(i)).await;
                record(&mut *tally.lock().await, status, t);
                i += 1;
            }
        });
    }
    while callers.join_next().await.is_some() {}
    let secs = started.elapsed().as_secs_f64();
    let tally = std::mem::take(&mut *tally.lock().await);
    (tally.latencies.len() as f64 / secs, tally)
}

/// Open loop at `rate` per second.
async fn at_rate(args: &ApiBench, http: &reqwest::Client, endpoint: Endpoint, rate: f64) -> Tally {
    let url = format!("{}{}", args.url.trim_end_matches('/'), endpoint.path());
    let tally = Arc::new(Mutex::new(Tally::default()));
    let total = (rate * args.duration as f64).round().max(1.0) as u64;
    let interval = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..total {
        let due = started + interval.mul_f64(i as f64);
        tokio::time::sleep_until(due.into()).await;
        let (http, url, key, tally) = (http.clone(), url.clone(), args.key.clone(), tally.clone());
        tasks.spawn(async move {
            let status = send(&http, &url, &key, &endpoint.body(i)).await;
            record(&mut *tally.lock().await, status, due);
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    std::mem::take(&mut *tally.lock().await)
}

pub async fn api(args: ApiBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.duration > 0 && args.callers > 0,
        "--duration and --callers must be above 0"
    );
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.callers * 2)
        .timeout(Duration::from_secs(60))
        .build()?;
    println!(
        "chat completions and responses against {}: {}s closed loop with {} callers, then {}s at half the rate reached",
        args.url, args.duration, args.callers, args.duration
    );
    for (name, endpoint) in [
        ("chat completions", Endpoint::Chat),
        ("responses", Endpoint::Responses),
    ] {
        let cpu = CpuTicks::now(None);
        let (rate, tally) = sustained(&args, &http, endpoint).await;
        let (machine, _) = CpuTicks::now(None).per_item(cpu, tally.latencies.len() as u64);
        println!(
            "{name}: sustained {rate:.0}/s; answers by status {:?}; CPU {machine:.2} ms per answer on the whole machine",
            tally.statuses
        );
        let mut half = at_rate(&args, &http, endpoint, rate / 2.0).await;
        half.latencies.sort_unstable();
        println!(
            "{name}: at {:.0}/s, end to end p50 {:.1} ms, p99 {:.1} ms; answers by status {:?}",
            rate / 2.0,
            pct(&half.latencies, 0.50),
            pct(&half.latencies, 0.99),
            half.statuses
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_endpoint_gets_its_own_request_shape() {
        assert_eq!(
            Endpoint::Chat.body(3)["messages"][0]["content"],
            "bench message 3"
        );
        assert_eq!(Endpoint::Responses.body(4)["input"], "bench message 4");
        let mut t = Tally::default();
        record(&mut t, "200".into(), Instant::now());
        record(&mut t, "503".into(), Instant::now());
        assert_eq!(t.latencies.len(), 1);
        assert_eq!(t.statuses["503"], 1);
    }
}
