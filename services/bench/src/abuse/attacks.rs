//! The attacks of `hermes bench abuse` and the normal caller they are measured against
//! (docs/security.md, "Abuse"). Each attack runs until it is told to stop and tallies what
//! the fleet answered it; the normal caller sends chat completions with its own key at a
//! fixed concurrency and records each answer's latency and whether it was an error.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::upstream::{Upstream, hold_marker};

/// One attack, as `--attack` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Attack {
    /// `--connections` slow-body requests with a bogus signature to each route whose
    /// signature covers the body: WhatsApp, Instagram and the Forge wake route (item 2).
    SlowBodies,
    /// A flood of chat completions with unknown Bearer keys, each a miss to look up (item 2).
    UnknownKeys,
    /// Chat completions from one key with 10 images each on a host that never finishes,
    /// and 11-image requests (item 1).
    Images,
    /// `--connections` chat completions from one key that its model holds, half streamed:
    /// one key trying to hold every slot (item 6).
    HeldCallers,
}

impl Attack {
    pub const ALL: [Attack; 4] = [
        Attack::SlowBodies,
        Attack::UnknownKeys,
        Attack::Images,
        Attack::HeldCallers,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Attack::SlowBodies => "slow-bodies",
            Attack::UnknownKeys => "unknown-keys",
            Attack::Images => "images",
            Attack::HeldCallers => "held-callers",
        }
    }

    /// The routes a slow-body attack holds, with the headers that get it past a check
    /// that only looks for a signature header.
    fn slow_routes() -> [(&'static str, String); 3] {
        let zeros = "0".repeat(64);
        let now = chrono::Utc::now().timestamp();
        [
            (
                "/webhooks/whatsapp",
                format!("x-hub-signature-256: sha256={zeros}\r\n"),
            ),
            (
                "/webhooks/instagram",
                format!("x-hub-signature-256: sha256={zeros}\r\n"),
            ),
            (
                "/agents/forge",
                format!(
                    "x-forge-signature: sha256={zeros}\r\nx-forge-timestamp: {now}\r\n\
                     x-forge-delivery: abuse\r\nx-forge-event: AGENT_ASSIGNED\r\n"
                ),
            ),
        ]
    }
}

/// Where the attacks and the normal caller send.
pub struct Target {
    pub http: String,
    pub addr: std::net::SocketAddr,
    pub normal_key: String,
    pub attacker_key: String,
    pub upstream: Arc<Upstream>,
    pub connections: usize,
}

/// What the fleet answered an attack: a count per outcome (`200`, `429`, `cut`, …).
#[derive(Default, Debug)]
pub struct Tally(std::sync::Mutex<BTreeMap<String, usize>>);

impl Tally {
    fn add(&self, outcome: impl Into<String>) {
        *hermes_types::sync::lock(&self.0)
            .entry(outcome.into())
            .or_default() += 1;
    }

    /// `200 ×12, 429 ×3`.
    pub fn summary(&self) -> String {
        let t = hermes_types::sync::lock(&self.0);
        if t.is_empty() {
            return "no answer".into();
        }
        t.iter()
            .map(|(k, v)| format!("{k} ×{v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A running attack: stop it with [`Running::stop`].
pub struct Running {
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    pub tally: Arc<Tally>,
}

impl Running {
    pub async fn stop(self) -> Arc<Tally> {
        self.stop.cancel();
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        self.tally
    }
}

/// Start `attack` against `target`; returns once it is established (every connection
/// opened and its first bytes sent, or 15 s passed).
pub async fn start(attack: Attack, target: &Arc<Target>) -> Running {
    let stop = CancellationToken::new();
    let tally = Arc::new(Tally::default());
    let opened = Arc::new((AtomicUsize::new(0), Notify::new()));
    let mut tasks = Vec::new();
    let expected = match attack {
        Attack::SlowBodies => {
            for (path, headers) in Attack::slow_routes() {
                for _ in 0..target.connections {
                    tasks.push(tokio::spawn(slow_body(
                        target.addr,
                        path,
                        headers.clone(),
                        tally.clone(),
                        opened.clone(),
                        stop.clone(),
                    )));
                }
            }
            3 * target.connections
        }
        Attack::UnknownKeys => {
            tasks.extend(loops(32, target, &tally, unknown_keys));
            0
        }
        Attack::Images => {
            tasks.extend(loops(16, target, &tally, images));
            0
        }
        Attack::HeldCallers => {
            tasks.extend(loops(target.connections, target, &tally, held));
            0
        }
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while opened.0.load(Ordering::SeqCst) < expected && Instant::now() < deadline {
        let _ = tokio::time::timeout(Duration::from_millis(200), opened.1.notified()).await;
    }
    if expected == 0 {
        // Let the flood reach its pace before the normal caller is measured.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Running { stop, tasks, tally }
}

/// `n` tasks running `f(target, tally, i)`.
fn loops<F, Fut>(
    n: usize,
    target: &Arc<Target>,
    tally: &Arc<Tally>,
    f: F,
) -> Vec<tokio::task::JoinHandle<()>>
where
    F: Fn(Arc<Target>, Arc<Tally>, usize) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    (0..n)
        .map(|i| tokio::spawn(f(target.clone(), tally.clone(), i)))
        .collect()
}

/// One slow-body connection, reopened whenever the server answers or hangs up: the head
/// and 16 bytes of a 32 KiB body (within every route's limit, so the body is really waited
/// for), then one byte a second.
async fn slow_body(
    addr: std::net::SocketAddr,
    path: &'static str,
    headers: String,
    tally: Arc<Tally>,
    opened: Arc<(AtomicUsize, Notify)>,
    stop: CancellationToken,
) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         {headers}content-length: 32768\r\n\r\n{{\"object\":\"abuse\""
    );
    let mut first = true;
    while !stop.is_cancelled() {
        let Ok(mut stream) = TcpStream::connect(addr).await else {
            tally.add("connect_failed");
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let sent = stream.write_all(head.as_bytes()).await.is_ok();
        if first {
            first = false;
            opened.0.fetch_add(1, Ordering::SeqCst);
            opened.1.notify_one();
        }
        if !sent {
            tally.add("cut");
            continue;
        }
        let mut buf = [0u8; 64];
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                read = stream.read(&mut buf) => {
                    match read {
                        Ok(n) if n >= 12 => tally.add(String::from_utf8_lossy(&buf[9..12]).into_owned()),
                        _ => tally.add("cut"),
                    }
                    break;
                }
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    if stream.write_all(b" ").await.is_err() {
                        tally.add("cut");
                        break;
                    }
                }
            }
        }
        // Answered or cut: come back at once, as a hostile client would.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn post(client: &reqwest::Client, t: &Target, key: &str, body: &Value) -> String {
    match client
        .post(format!("{}/v1/chat/completions", t.http))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
    {
        Ok(resp) => {
            let status = resp.status().as_u16().to_string();
            // Read the whole answer (a stream ends with its run).
            let _ = resp.bytes().await;
            status
        }
        Err(e) if e.is_timeout() => "timeout".into(),
        Err(_) => "error".into(),
    }
}

async fn unknown_keys(t: Arc<Target>, tally: Arc<Tally>, _: usize) {
    let client = reqwest::Client::new();
    let body = json!({"messages": [{"role": "user", "content": "hello"}]});
    loop {
        let key = format!("abuse-{}", uuid::Uuid::now_v7().simple());
        tally.add(post(&client, &t, &key, &body).await);
    }
}

async fn images(t: Arc<Target>, tally: Arc<Tally>, i: usize) {
    let client = reqwest::Client::new();
    let mut n = 0usize;
    loop {
        n += 1;
        // Every fourth request one image over the default cap of 10.
        let count = if (i + n).is_multiple_of(4) { 11 } else { 10 };
        let mut content = vec![json!({"type": "text", "text": "describe these"})];
        for k in 0..count {
            let url = format!(
                "{}/img/slow.png?r={i}-{n}-{k}&hold={}",
                t.upstream.base,
                t.upstream.token()
            );
            content.push(json!({"type": "image_url", "image_url": {"url": url}}));
        }
        let body = json!({"messages": [{"role": "user", "content": content}]});
        tally.add(post(&client, &t, &t.attacker_key, &body).await);
    }
}

async fn held(t: Arc<Target>, tally: Arc<Tally>, i: usize) {
    let client = reqwest::Client::new();
    loop {
        let hold = hold_marker(t.upstream.token());
        let body = json!({
            "messages": [{"role": "user", "content": format!("{hold} caller {i}")}],
            "stream": i.is_multiple_of(2),
        });
        tally.add(post(&client, &t, &t.attacker_key, &body).await);
    }
}

/// The normal caller's answers of one phase.
#[derive(Default)]
pub struct Sample {
    /// Latencies of the answers, in microseconds.
    pub latencies: Vec<u64>,
    pub errors: usize,
}

impl Sample {
    /// The `p` quantile in milliseconds (0 without answers).
    pub fn pct(&self, p: f64) -> f64 {
        if self.latencies.is_empty() {
            return 0.0;
        }
        let mut v = self.latencies.clone();
        v.sort_unstable();
        let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
        v[i] as f64 / 1000.0
    }
}

/// The normal caller: `concurrency` loops of chat completions with its own key for `secs`.
pub async fn normal(t: &Arc<Target>, concurrency: usize, secs: Duration) -> Sample {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap_or_default();
    let until = Instant::now() + secs;
    let loops = (0..concurrency).map(|i| {
        let (client, t) = (client.clone(), t.clone());
        tokio::spawn(async move {
            let mut s = Sample::default();
            let mut n = 0usize;
            while Instant::now() < until {
                n += 1;
                let body =
                    json!({"messages": [{"role": "user", "content": format!("normal {i} {n}")}]});
                let start = Instant::now();
                let status = post(&client, &t, &t.normal_key, &body).await;
                if status == "200" {
                    s.latencies.push(start.elapsed().as_micros() as u64);
                } else {
                    s.errors += 1;
                }
            }
            s
        })
    });
    let mut all = Sample::default();
    for s in futures_util::future::join_all(loops)
        .await
        .into_iter()
        .flatten()
    {
        all.latencies.extend(s.latencies);
        all.errors += s.errors;
    }
    all
}
