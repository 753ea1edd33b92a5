//! What the benches share to report a figure the same way (docs/performance.md): the median
//! of alternated rounds, the bookkeeping of a throughput-frontier search (double while the
//! bound holds, then bisect), and a ratio of a measured figure to its infrastructure floor
//! measured in the same run, with the target it must meet.

/// The median of `values` (the mean of the middle two for an even count; 0 when empty).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
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

/// Latencies in microseconds, read as percentiles in milliseconds.
#[derive(Default)]
pub(crate) struct Latencies(pub(crate) Vec<u64>);

impl Latencies {
    /// The `p` quantile (0..=1) in milliseconds, nearest rank (0 when empty).
    pub(crate) fn pct(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        let mut v = self.0.clone();
        v.sort_unstable();
        let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
        v[i] as f64 / 1000.0
    }
}

/// A frontier search: the highest rate whose step held its bound. The rate doubles from the
/// start while the bound holds (up to `max`), then bisects between the best rate that held
/// and the lowest that broke, `bisections` times. The caller runs a step at [`Self::rate`]
/// and reports whether it held with [`Self::record`] until that says the search is done.
#[derive(Debug, Clone)]
pub(crate) struct Frontier {
    rate: f64,
    max: f64,
    good: f64,
    bad: Option<f64>,
    bisections_left: usize,
}

impl Frontier {
    pub(crate) fn new(start: f64, max: f64, bisections: usize) -> Self {
        Self {
            rate: start,
            max,
            good: 0.0,
            bad: None,
            bisections_left: bisections,
        }
    }

    /// The rate of the next step.
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// Record whether the step at [`Self::rate`] held the bound; `true` while another step
    /// is needed (the rate has moved), `false` once the search is done.
    pub(crate) fn record(&mut self, holds: bool) -> bool {
        if holds {
            self.good = self.good.max(self.rate);
        } else {
            self.bad = Some(self.bad.map_or(self.rate, |b| b.min(self.rate)));
        }
        match self.bad {
            None if self.rate * 2.0 <= self.max => {
                self.rate *= 2.0;
                true
            }
            None => false,
            Some(_) if self.bisections_left == 0 => false,
            Some(bad) => {
                self.bisections_left -= 1;
                self.rate = (self.good + bad) / 2.0;
                true
            }
        }
    }

    /// The highest rate that held (0 when none did).
    pub(crate) fn result(&self) -> f64 {
        self.good
    }
}

/// Which way a ratio must go to meet its target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Target {
    AtLeast(f64),
    AtMost(f64),
}

/// A measured figure against its floor: `measured ÷ floor`, and whether that meets `target`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ratio {
    pub measured: f64,
    pub floor: f64,
    pub target: Target,
}

impl Ratio {
    /// `measured ÷ floor`; 0 when the floor is 0 (nothing to compare with).
    pub(crate) fn value(&self) -> f64 {
        if self.floor > 0.0 {
            self.measured / self.floor
        } else {
            0.0
        }
    }

    pub(crate) fn meets(&self) -> bool {
        let v = self.value();
        match self.target {
            Target::AtLeast(t) => self.floor > 0.0 && v >= t,
            Target::AtMost(t) => self.floor > 0.0 && v <= t,
        }
    }

    /// The target as printed: `≥ 70 %` or `≤ 2.0×`, as `percent` asks.
    pub(crate) fn target_text(&self, percent: bool) -> String {
        let (sign, t) = match self.target {
            Target::AtLeast(t) => ("≥", t),
            Target::AtMost(t) => ("≤", t),
        };
        if percent {
            format!("{sign} {:.0} %", t * 100.0)
        } else {
            format!("{sign} {t:.1}×")
        }
    }

    /// The ratio as printed, in the target's unit.
    pub(crate) fn value_text(&self, percent: bool) -> String {
        if percent {
            format!("{:.0} %", self.value() * 100.0)
        } else {
            format!("{:.2}×", self.value())
        }
    }
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

    /// Drive a search against a system whose bound holds up to `limit`; the rates tried.
    fn search(start: f64, max: f64, bisections: usize, limit: f64) -> (f64, Vec<f64>) {
        let mut f = Frontier::new(start, max, bisections);
        let mut tried = vec![f.rate()];
        while f.record(f.rate() <= limit) {
            tried.push(f.rate());
        }
        (f.result(), tried)
    }

    #[test]
    fn the_frontier_doubles_then_bisects_between_held_and_broken() {
        let (frontier, tried) = search(100.0, 10_000.0, 2, 500.0);
        // 100, 200, 400 hold; 800 breaks; then 600 (breaks), 500 (holds).
        assert_eq!(tried, vec![100.0, 200.0, 400.0, 800.0, 600.0, 500.0]);
        assert_eq!(frontier, 500.0);
    }

    #[test]
    fn the_frontier_stops_at_the_maximum_or_at_zero() {
        let (frontier, tried) = search(100.0, 400.0, 3, f64::INFINITY);
        assert_eq!((frontier, tried), (400.0, vec![100.0, 200.0, 400.0]));
        let (frontier, _) = search(100.0, 400.0, 1, 10.0);
        assert_eq!(frontier, 0.0);
    }

    #[test]
    fn a_ratio_meets_its_target_only_against_a_measured_floor() {
        let r = Ratio {
            measured: 700.0,
            floor: 1000.0,
            target: Target::AtLeast(0.7),
        };
        assert!((r.value() - 0.7).abs() < 1e-12);
        assert!(r.meets());
        assert_eq!(r.value_text(true), "70 %");
        assert_eq!(r.target_text(true), "≥ 70 %");
        let p99 = Ratio {
            measured: 30.0,
            floor: 10.0,
            target: Target::AtMost(2.0),
        };
        assert!(!p99.meets());
        assert_eq!(p99.value_text(false), "3.00×");
        let none = Ratio {
            measured: 5.0,
            floor: 0.0,
            target: Target::AtMost(2.0),
        };
        assert_eq!(none.value(), 0.0);
        assert!(!none.meets());
    }
}
