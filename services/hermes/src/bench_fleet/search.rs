//! The throughput frontier, shared by `hermes bench fleet` and `hermes bench floor`: the
//! highest open-loop rate whose step answered every request as itself with p99 under a
//! bound, found by doubling from a start rate until the bound breaks, then bisecting. Both
//! use the same search, so their frontiers compare (docs/performance.md, "Whole fleet").

use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::load::{self, Figures, Requests};

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
/// Halving steps of the frontier search once the bound broke.
const BISECTIONS: usize = 3;

/// The highest rate whose step answered every request as itself with p99 under the bound.
/// A step whose ledger does not add up (or after which `doubled` reports doubled answers)
/// is written to `void`.
pub async fn frontier(
    requests: &Arc<dyn Requests>,
    args: &SearchArgs,
    tag: &str,
    void: &mut Vec<String>,
    doubled: &(dyn Fn() -> usize + Sync),
) -> f64 {
    let bound = args.bound();
    let mut good = 0.0_f64;
    let mut bad = None::<f64>;
    let mut rate = args.start_rate;
    let mut bisections = 0;
    for n in 0.. {
        let samples = load::step(
            requests,
            rate,
            args.step_secs,
            &format!("{tag}-f{n}"),
            REQUEST_TIMEOUT,
        )
        .await;
        let f = Figures::of(&samples);
        let twice = doubled();
        if !f.adds_up() || twice > 0 {
            void.push(format!(
                "{tag} search at {rate:.0}/s: {f:?}, {twice} answers doubled"
            ));
        }
        let holds = f.clean() && f.p99 <= bound;
        eprintln!(
            "bench: {tag} {rate:.0}/s: p99 {} ms, {}/{} answered{}",
            f.p99.as_millis(),
            f.answered,
            f.sent,
            if holds { "" } else { " (bound broken)" }
        );
        if holds {
            good = good.max(rate);
        } else {
            bad = Some(bad.map_or(rate, |b| b.min(rate)));
        }
        rate = match bad {
            None if rate * 2.0 <= args.max_rate => rate * 2.0,
            None => return good,
            Some(b) => {
                if bisections == BISECTIONS {
                    return good;
                }
                bisections += 1;
                (good + b) / 2.0
            }
        };
        // Let the backlog of a broken step drain before the next.
        if !holds {
            settle(requests).await;
        }
    }
    good
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

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// Milliseconds of a duration, for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }
}
