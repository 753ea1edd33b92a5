//! The throughput frontier, shared by `hermes bench fleet` and `hermes bench floor`: the
//! highest open-loop rate whose step answered every request as itself with p99 under a
//! bound, found by doubling from a start rate until the bound breaks, then bisecting. Both
//! use the same search (its bookkeeping is `bench_stats::Frontier`, which the ingest bench
//! uses too), so their frontiers compare (docs/performance.md, "Whole fleet").

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::load::{self, Figures, Requests};
use crate::stats::Frontier;

/// How the frontier is searched and how long each measurement runs.
#[derive(Args, Debug, Clone)]
pub struct SearchArgs {
    /// Measure at this rate (requests/s) only, with no frontier search: the ledger check of
    /// scripts/test, or a point of your choice.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seconds of load at the measured rate (half the frontier, or `--rate`).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Rounds: each frontier and measurement is taken this many times, alternated.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// The frontier search starts here (requests/s) and doubles while the bound holds.
    #[arg(long, default_value_t = 25.0)]
    pub start_rate: f64,
    /// The frontier search never goes above this rate.
    #[arg(long, default_value_t = 4000.0)]
    pub max_rate: f64,
    /// Seconds of load per step of the frontier search.
    #[arg(long, default_value_t = 4.0)]
    pub step_secs: f64,
    /// Halving steps of the frontier search once the bound broke: each halves the
    /// uncertainty (3 leave about a twelfth of the frontier; `--tracing` wants more to tell
    /// a few percent apart).
    #[arg(long, default_value_t = 3)]
    pub bisections: usize,
    /// The p99 bound of the frontier, in milliseconds (from each request's scheduled time).
    #[arg(long, default_value_t = 250)]
    pub p99_bound_ms: u64,
    /// Requests sent one at a time (each once the one before ended) per round, for the
    /// latency of the path with nothing queued ahead (0: none).
    #[arg(long, default_value_t = 50)]
    pub serial: usize,
}

impl SearchArgs {
    pub fn bound(&self) -> Duration {
        Duration::from_millis(self.p99_bound_ms)
    }
}

/// A request not answered in this long is lost (the fleet's own run timeout is shorter).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The highest rate whose step answered every request as itself with p99 under the bound,
/// after a step that warms the fleet. A step whose ledger does not add up (or after which `doubled` reports doubled answers)
/// is written to `void`.
pub async fn frontier(
    requests: &Arc<dyn Requests>,
    args: &SearchArgs,
    tag: &str,
    void: &mut Vec<String>,
    doubled: &(dyn Fn() -> usize + Sync),
) -> f64 {
    let bound = args.bound();
    // A fleet started for its turn has cold connection pools and caches, and a traced one a
    // cold exporter: a first step measured those, and broke the bound of fully traced fleets
    // at rates they held a step later (docs/performance.md, "Tracing's cost"). This step at
    // half the start rate warms them and is not counted.
    let warm = args.start_rate / 2.0;
    let f = step(requests, args, warm, &format!("{tag}-warm"), void, doubled).await;
    eprintln!(
        "bench: {tag} warm-up at {warm:.0}/s (not counted): p99 {} ms, {}/{} answered",
        f.p99.as_millis(),
        f.answered,
        f.sent
    );
    let mut search = Frontier::new(args.start_rate, args.max_rate, args.bisections);
    for n in 0.. {
        let rate = search.rate();
        let f = step(requests, args, rate, &format!("{tag}-f{n}"), void, doubled).await;
        let holds = f.clean() && f.p99 <= bound;
        eprintln!(
            "bench: {tag} {rate:.0}/s: p99 {} ms, {}/{} answered{}",
            f.p99.as_millis(),
            f.answered,
            f.sent,
            if holds { "" } else { " (bound broken)" }
        );
        if !search.record(holds) {
            break;
        }
        // Let the backlog of a broken step drain before the next.
        if !holds {
            settle(requests).await;
        }
    }
    search.result()
}

/// One step of the search at `rate`; a step whose ledger does not add up, or after which
/// `doubled` reports doubled answers, is written to `void`.
async fn step(
    requests: &Arc<dyn Requests>,
    args: &SearchArgs,
    rate: f64,
    label: &str,
    void: &mut Vec<String>,
    doubled: &(dyn Fn() -> usize + Sync),
) -> Figures {
    let samples = load::step(requests, rate, args.step_secs, label, REQUEST_TIMEOUT).await;
    let f = Figures::of(&samples);
    let twice = doubled();
    if !f.adds_up() || twice > 0 {
        void.push(format!(
            "{label} search at {rate:.0}/s: {f:?}, {twice} answers doubled"
        ));
    }
    f
}

/// Wait until one request a second is answered quickly again (a broken step leaves a
/// backlog).
pub async fn settle(requests: &Arc<dyn Requests>) {
    for _ in 0..60 {
        let samples = load::step(requests, 1.0, 1.0, "settle", REQUEST_TIMEOUT).await;
        if samples
            .iter()
            .all(|s| s.latency < Duration::from_millis(100))
        {
            return;
        }
    }
}

/// Milliseconds of a duration, for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
