//! `hermes bench ingest --with-floor` (and `--floor-only`): ingest and its raw-publish floor
//! alternated round by round, so the machine's drift touches both alike. Each round finds
//! both frontiers (the highest rate all accepted with p99 within the bound), then measures
//! both at half the floor's frontier; the report gives each figure's median over the rounds
//! beside its ratio and target (docs/performance.md, Ingest).

use std::time::Duration;

use super::floor::Floor;
use super::{IngestBench, Step, Webhooks, drain};
use crate::stats::{Frontier, Ratio, Target, median};

/// Bisections of each frontier search after the first broken step.
const BISECTIONS: usize = 2;

/// The floor's queue expires this long after its last use if the bench dies before deleting it.
const FLOOR_QUEUE_EXPIRES: Duration = Duration::from_secs(300);

/// One round's figures.
#[derive(Debug, Default)]
struct Round {
    ingest_frontier: Option<f64>,
    floor_frontier: f64,
    /// Half the floor's frontier: where both p99s are taken.
    half: f64,
    ingest: Option<Step>,
    floor: Step,
    ingest_rss_kib: Option<u64>,
}

/// Run the rounds, then delete the floor's queue, also on an error or Ctrl-C.
pub(super) async fn run(args: &IngestBench) -> anyhow::Result<()> {
    let body_len = super::envelope_len(args.senders)?;
    let queue = format!(
        "bench-floor-{}.ingest",
        &uuid::Uuid::now_v7().simple().to_string()[20..]
    );
    let floor = Floor::open(
        &args.amqp_url,
        &queue,
        body_len,
        args.publish_window,
        FLOOR_QUEUE_EXPIRES,
    )
    .await?;
    println!(
        "floor: persistent {body_len}-byte publishes with confirms (window {}) into quorum queue {queue}",
        args.publish_window
    );
    let stop_drain = tokio_util::sync::CancellationToken::new();
    let drainer = match (&args.drain, args.floor_only) {
        (Some(ns), false) => {
            let expires = args.queue_expires_secs.map(Duration::from_secs);
            Some(drain(ns, &args.amqp_url, expires, stop_drain.clone()).await?)
        }
        _ => None,
    };
    let result = tokio::select! {
        r = rounds(args, &floor) => r,
        signal = crate::interrupted() => Err(anyhow::anyhow!("interrupted by {signal}")),
    };
    stop_drain.cancel();
    if let Some(d) = drainer {
        let _ = d.await;
    }
    if let Err(e) = floor.close().await {
        eprintln!(
            "bench ingest: cannot delete {queue} (it expires unused after {FLOOR_QUEUE_EXPIRES:?}): {e}"
        );
    }
    result
}

async fn rounds(args: &IngestBench, floor: &Floor) -> anyhow::Result<()> {
    let webhooks = (!args.floor_only)
        .then(|| Webhooks::new(args))
        .transpose()?;
    let load = crate::procstat::load_average();
    let mut results = Vec::new();
    for round in 0..args.rounds.max(1) {
        let mut r = Round::default();
        if let Some(w) = &webhooks {
            r.ingest_frontier = Some(
                search(args, &format!("r{round} ingest"), async |rate| {
                    w.send(rate, args.step_secs).await.step
                })
                .await,
            );
        }
        r.floor_frontier = search(args, &format!("r{round} floor"), async |rate| {
            floor.step(rate, args.step_secs, args.max_in_flight).await
        })
        .await;
        r.half = (r.floor_frontier / 2.0).max(1.0);
        if let Some(w) = &webhooks {
            let step = w.send(r.half, args.duration as f64).await.step;
            r.ingest_rss_kib = args.pid.and_then(crate::procstat::read).map(|m| m.rss_kib);
            r.ingest = Some(step);
        }
        r.floor = floor
            .step(r.half, args.duration as f64, args.max_in_flight)
            .await;
        eprintln!("bench ingest: round {round}: {r:?}");
        results.push(r);
    }
    report(&results, &load, args.p99_bound_ms);
    Ok(())
}

/// One frontier search, printing each step.
async fn search(args: &IngestBench, tag: &str, mut step: impl AsyncFnMut(f64) -> Step) -> f64 {
    let mut frontier = Frontier::new(args.start_rate, args.max_rate, BISECTIONS);
    loop {
        let rate = frontier.rate();
        let s = step(rate).await;
        let holds = s.holds(args.p99_bound_ms);
        eprintln!(
            "bench ingest: {tag} {rate:.0}/s: {}/{} accepted, p99 {:.1} ms{}",
            s.accepted,
            s.sent,
            s.p99_ms,
            if holds { "" } else { " (bound broken)" }
        );
        if !frontier.record(holds) {
            return frontier.result();
        }
    }
}

/// The table: each figure the median over the rounds, its ratio to the floor and its target.
fn report(results: &[Round], load: &str, bound_ms: f64) {
    let m = |f: &dyn Fn(&Round) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = results.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| median(v))
    };
    let floor_frontier = m(&|r| Some(r.floor_frontier)).unwrap_or(0.0);
    let half = m(&|r| Some(r.half)).unwrap_or(0.0);
    let floor_p99 = m(&|r| Some(r.floor.p99_ms)).unwrap_or(0.0);
    println!(
        "ingest against its floor, medians of {} rounds (frontier: all accepted, p99 ≤ {bound_ms} ms; load average at the start {load}):",
        results.len()
    );
    println!(
        "{:<44} {:>10} {:>10} {:>8} {:>8} {:>4}",
        "figure", "ingest", "floor", "ratio", "target", "met"
    );
    println!(
        "{:<44} {:>10} {floor_frontier:>10.0}",
        "frontier (per second)",
        m(&|r| r.ingest_frontier).map_or("-".into(), |v| format!("{v:.0}"))
    );
    println!(
        "{:<44} {:>10} {floor_p99:>10.2}",
        format!("p99 ms at {half:.0}/s (half the floor's frontier)"),
        m(&|r| r.ingest.as_ref().map(|s| s.p99_ms)).map_or("-".into(), |v| format!("{v:.2}"))
    );
    let Some(ingest_frontier) = m(&|r| r.ingest_frontier) else {
        return;
    };
    let ratios = [
        (
            "accepted rate ÷ raw publish rate (frontiers)",
            Ratio {
                measured: ingest_frontier,
                floor: floor_frontier,
                target: Target::AtLeast(0.7),
            },
            true,
        ),
        (
            "p99 ÷ raw p99 at half the floor's frontier",
            Ratio {
                measured: m(&|r| r.ingest.as_ref().map(|s| s.p99_ms)).unwrap_or(0.0),
                floor: floor_p99,
                target: Target::AtMost(2.0),
            },
            false,
        ),
    ];
    for (name, r, percent) in ratios {
        println!(
            "{name:<44} {:>10.2} {:>10.2} {:>8} {:>8} {:>4}",
            r.measured,
            r.floor,
            r.value_text(percent),
            r.target_text(percent),
            if r.meets() { "yes" } else { "no" }
        );
    }
    if let Some(rss) = m(&|r| r.ingest_rss_kib.map(|k| k as f64 / 1024.0)) {
        println!(
            "{:<44} {rss:>10.1} {:>10} {:>8} {:>8} {:>4}",
            "ingest RSS MiB",
            "-",
            "-",
            "< 50",
            if rss < 50.0 { "yes" } else { "no" }
        );
    }
}
