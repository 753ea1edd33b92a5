//! `hermes bench fleet --soak <minutes>`: the memory target of docs/performance.md ("Memory:
//! the soak"). It reads each service's idle memory once the fleet is warmed and quiet, then
//! holds an open-loop load for the given minutes in consecutive steps, each with its own
//! ledger, sampling every process's resident memory (`VmRSS`) after each step. It reports,
//! per process, the memory after the first minute and at the end, the growth per 10 minutes
//! (the least-squares slope of the samples after the first minute) and the maximum; the
//! latency of each step, so a drift shows; whether each target is met; and the ledger. A
//! ledger broken in any step voids the run (exit non-zero).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::ValueEnum;

use std::sync::Arc;

use super::load::{self, Figures, FleetRequests, Kind, Requests};
use super::search::{self, REQUEST_TIMEOUT, ms};
use super::{FleetBench, infra};
use crate::fleet_process::Fleet;
use crate::procstat;

/// Requests of `kind` to the fleet at `target`.
fn requests(target: &load::Target, kind: Kind) -> Arc<dyn Requests> {
    Arc::new(FleetRequests {
        target: target.clone(),
        kind,
    })
}

/// No process may grow more than this per 10 minutes after the first minute.
const GROWTH_TARGET_MIB_PER_10_MIN: f64 = 1.0;
/// Each service idles under this.
const IDLE_TARGET_MIB: f64 = 30.0;
/// The growth is fitted from this far into the soak: the first minute fills the pools,
/// caches and allocator arenas the load needs, which is not a leak.
const WARM_SECS: f64 = 60.0;
/// Requests of each kind that warm the fleet before its idle reading (in one second).
const WARM_REQUESTS: f64 = 5.0;
/// The idle reading: every process's memory read once a second for this many seconds, the
/// highest kept.
const IDLE_READ_SECS: u32 = 5;
/// The fleet is quiet when its publish counter stood still between two reads this far apart
/// and no model call is in flight.
const QUIET_POLL: Duration = Duration::from_millis(500);
/// Past this, the idle reading is taken anyway and says the fleet was not quiet.
const QUIET_BOUND: Duration = Duration::from_secs(30);

/// Run the soak on a started fleet, stop the fleet, and print the report.
pub(super) async fn run(
    target: &load::Target,
    fleet: &mut Fleet,
    args: &FleetBench,
    minutes: f64,
) -> anyhow::Result<()> {
    if !(minutes > 0.0 && minutes.is_finite()) {
        anyhow::bail!("--soak: {minutes} is not a number of minutes above zero");
    }
    if !(args.soak_step_secs >= 1.0 && args.soak_step_secs.is_finite()) {
        anyhow::bail!(
            "--soak-step-secs: {} is under one second",
            args.soak_step_secs
        );
    }
    let mut void = Vec::new();
    let soak = soak(target, fleet, args, minutes, &mut void).await;
    fleet.stop_all().await;
    // A doubled answer that came after its step ended still voids the run.
    let late = target.chats.take_doubled();
    soak?.report();
    load::close_ledger(late, void)
}

/// What a soak measured.
struct Soak {
    /// The fleet's processes, in start order.
    services: Vec<&'static str>,
    /// The highest resident memory (KiB) of each process during the idle reading.
    idle_kib: Vec<u64>,
    /// The highest of its own part (`RssAnon`, KiB) during the idle reading.
    idle_anon_kib: Vec<u64>,
    /// Whether the fleet was quiet before the idle reading (else it was read after the bound).
    quiet: bool,
    rate: f64,
    steps: Vec<Step>,
    machine: String,
}

/// One step of the soak and the memory read at its end.
struct Step {
    kind: Kind,
    /// Seconds since the soak's first step began.
    at_secs: f64,
    figures: Figures,
    /// Resident memory (KiB) of each process, in the order of `Soak::services`.
    rss_kib: Vec<u64>,
    /// The shared servers' resident memory (KiB), summed over their processes.
    servers_kib: BTreeMap<infra::Server, u64>,
}

async fn soak(
    target: &load::Target,
    fleet: &Fleet,
    args: &FleetBench,
    minutes: f64,
    void: &mut Vec<String>,
) -> anyhow::Result<Soak> {
    let (services, pids): (Vec<&'static str>, Vec<u32>) = fleet.pids().into_iter().unzip();
    let ports = fleet.admin_ports();
    let start_machine = infra::Machine::now(&pids);

    eprintln!("bench fleet soak: warming with {WARM_REQUESTS} requests of each kind");
    let warm_began = Instant::now();
    for &kind in Kind::value_variants() {
        let tag = format!("warm-{}", kind.name());
        let samples = load::step(
            &requests(target, kind),
            WARM_REQUESTS,
            1.0,
            &tag,
            REQUEST_TIMEOUT,
        )
        .await;
        keep_ledger(target, &tag, &Figures::of(&samples), void);
    }
    let was_quiet = quiet(&target.client, &ports).await;
    let (idle_kib, idle_anon_kib) = idle_reading(&pids).await?;
    eprintln!(
        "bench fleet soak: warm-up and idle reading took {:.0} s{}",
        warm_began.elapsed().as_secs_f64(),
        if was_quiet {
            ""
        } else {
            " (the fleet was not quiet)"
        }
    );

    let kinds = &args.kinds;
    let rate = match args.search.rate {
        Some(rate) => rate,
        None => {
            // Half the lowest frontier of the kinds, so every step of the turns is at half
            // its own frontier or below.
            let mut lowest = f64::INFINITY;
            let doubled = || target.chats.take_doubled();
            for &kind in kinds {
                let tag = format!("soak-{}", kind.name());
                let f =
                    search::frontier(&requests(target, kind), &args.search, &tag, void, &doubled)
                        .await;
                lowest = lowest.min(f);
            }
            search::settle(&requests(target, Kind::Chat)).await;
            quiet(&target.client, &ports).await;
            (lowest / 2.0).max(1.0)
        }
    };

    // Whole milliseconds, so 0.1 minutes is 6 s and not a step of 6 s and a sliver.
    let total = (minutes * 60_000.0).round() / 1000.0;
    let step_secs = args.soak_step_secs;
    let count = (total / step_secs).ceil() as usize;
    eprintln!(
        "bench fleet soak: {count} steps of {step_secs:.0} s at {rate:.0}/s ({})",
        names(kinds)
    );
    let began = Instant::now();
    let mut steps = Vec::with_capacity(count);
    for i in 0..count {
        let kind = kinds[i % kinds.len()];
        let secs = (total - i as f64 * step_secs).min(step_secs);
        let tag = format!("soak{i}-{}", kind.name());
        let samples = load::step(&requests(target, kind), rate, secs, &tag, REQUEST_TIMEOUT).await;
        let figures = Figures::of(&samples);
        let mut rss_kib = Vec::with_capacity(pids.len());
        for (service, pid) in services.iter().zip(&pids) {
            match procstat::read(*pid) {
                Some(r) => rss_kib.push(r.rss_kib),
                None => anyhow::bail!("{service} (pid {pid}) ended during the soak"),
            }
        }
        let step = Step {
            kind,
            at_secs: began.elapsed().as_secs_f64(),
            figures,
            rss_kib,
            servers_kib: infra::server_rss_kib(),
        };
        eprintln!(
            "bench fleet soak: step {}/{count} ({}, t {:.0} s): {}/{} answered, p50 {:.1} ms, p99 {:.1} ms, RSS {}",
            i + 1,
            kind.name(),
            step.at_secs,
            figures.answered,
            figures.sent,
            ms(figures.p50),
            ms(figures.p99),
            mib_list(&services, &step.rss_kib)
        );
        steps.push(step);
        if !keep_ledger(target, &tag, &figures, void) {
            eprintln!("bench fleet soak: the ledger broke, stopping");
            break;
        }
    }
    Ok(Soak {
        services,
        idle_kib,
        idle_anon_kib,
        quiet: was_quiet,
        rate,
        steps,
        machine: infra::Machine::now(&pids).since(&start_machine),
    })
}

/// Whether a step's ledger adds up (and no Telegram answer came twice); if not, why is added
/// to `void`.
fn keep_ledger(target: &load::Target, tag: &str, f: &Figures, void: &mut Vec<String>) -> bool {
    let doubled = target.chats.take_doubled();
    let kept = f.adds_up() && doubled == 0;
    if !kept {
        void.push(format!("{tag}: {f:?}, {doubled} chat answers doubled"));
    }
    kept
}

/// Wait until the fleet has nothing in flight: its publish counter stands still between two
/// reads and no model call is open. False when it did not within `QUIET_BOUND`.
async fn quiet(client: &reqwest::Client, ports: &[u16]) -> bool {
    let began = Instant::now();
    let mut last = None;
    loop {
        let published = infra::metric_sum(client, ports, "hermes_bus_published_total").await;
        let in_flight = infra::metric_sum(client, ports, "hermes_llm_in_flight").await;
        if in_flight == 0.0 && last == Some(published) {
            return true;
        }
        if began.elapsed() > QUIET_BOUND {
            return false;
        }
        last = Some(published);
        tokio::time::sleep(QUIET_POLL).await;
    }
}

/// The highest resident memory (KiB) of each process over `IDLE_READ_SECS` of idleness, and
/// the highest of its own part (`RssAnon`).
async fn idle_reading(pids: &[u32]) -> anyhow::Result<(Vec<u64>, Vec<u64>)> {
    let mut highest = vec![0; pids.len()];
    let mut anon = vec![0; pids.len()];
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    for _ in 0..IDLE_READ_SECS {
        tick.tick().await;
        for ((h, a), pid) in highest.iter_mut().zip(anon.iter_mut()).zip(pids) {
            let r = procstat::read(*pid)
                .ok_or_else(|| anyhow::anyhow!("pid {pid} ended before the soak"))?;
            *h = (*h).max(r.rss_kib);
            *a = (*a).max(r.anon_kib);
        }
    }
    Ok((highest, anon))
}

/// The least-squares slope of `points` (seconds, MiB), in MiB per 10 minutes; `None` with
/// fewer than two points or all at one instant.
fn growth_per_10_min(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    Some(sxy / sxx * 600.0)
}

/// The index of the first sample the growth is fitted from: the first taken at or after the
/// first minute, but never leaving fewer than two samples when there are two (a soak shorter
/// than two minutes fits its last two, and says from when).
fn fit_start(at_secs: &[f64]) -> usize {
    let after_warm = at_secs
        .iter()
        .position(|t| *t >= WARM_SECS)
        .unwrap_or(at_secs.len());
    after_warm.min(at_secs.len().saturating_sub(2))
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn mib_list(services: &[&str], kib: &[u64]) -> String {
    services
        .iter()
        .zip(kib)
        .map(|(s, k)| format!("{s} {:.1} MiB", mib(*k)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn names(kinds: &[Kind]) -> String {
    kinds
        .iter()
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One series' memory summary: at the fit's start, at the end, growth, maximum.
struct Series {
    /// When the fit's first sample was taken (seconds into the soak), and its MiB.
    first_at: f64,
    first: f64,
    end: f64,
    growth: Option<f64>,
    max: f64,
}

impl Series {
    /// `values` (KiB) sampled at `at_secs`, fitted from `from`.
    fn of(at_secs: &[f64], values: &[u64], from: usize) -> Option<Self> {
        let points: Vec<(f64, f64)> = at_secs
            .iter()
            .zip(values)
            .skip(from)
            .map(|(t, v)| (*t, mib(*v)))
            .collect();
        Some(Self {
            first_at: points.first()?.0,
            first: points.first()?.1,
            end: points.last()?.1,
            growth: growth_per_10_min(&points),
            max: values.iter().copied().max().map(mib)?,
        })
    }

    fn line(&self) -> String {
        format!(
            "at {:.0} s {:.1} MiB, at the end {:.1} MiB, growth {} MiB/10 min, max {:.1} MiB",
            self.first_at,
            self.first,
            self.end,
            self.growth
                .map_or("n/a".to_string(), |g| format!("{g:+.2}")),
            self.max
        )
    }
}

impl Soak {
    fn report(&self) {
        let kinds: Vec<Kind> = self.steps.iter().map(|s| s.kind).collect();
        let mut kinds_seen = kinds.clone();
        kinds_seen.dedup();
        println!(
            "soak: {} steps at {:.0}/s ({}), {:.1} min",
            self.steps.len(),
            self.rate,
            names(&kinds_seen),
            self.steps.last().map_or(0.0, |s| s.at_secs / 60.0)
        );
        println!(
            "idle RSS (warmed with {WARM_REQUESTS} requests of each kind, then {}; highest over {IDLE_READ_SECS} s): {}",
            if self.quiet {
                "nothing in flight"
            } else {
                "still busy after 30 s"
            },
            mib_list(&self.services, &self.idle_kib)
        );
        println!(
            "  of which its own (RssAnon; the rest is mapped from files, mostly the binary's code, shared by every process of it): {}",
            mib_list(&self.services, &self.idle_anon_kib)
        );
        println!(
            "{:<5} {:<12} {:>7} {:>8} {:>9} {:>8} {:>9} {:>9}  RSS MiB per process",
            "step", "kind", "t s", "sent", "answered", "refused", "p50 ms", "p99 ms"
        );
        for (i, s) in self.steps.iter().enumerate() {
            let f = &s.figures;
            let rss: Vec<String> = s
                .rss_kib
                .iter()
                .map(|k| format!("{:.1}", mib(*k)))
                .collect();
            println!(
                "{:<5} {:<12} {:>7.0} {:>8} {:>9} {:>8} {:>9.1} {:>9.1}  {}",
                i + 1,
                s.kind.name(),
                s.at_secs,
                f.sent,
                f.answered,
                f.refused,
                ms(f.p50),
                ms(f.p99),
                rss.join(" ")
            );
        }
        let at: Vec<f64> = self.steps.iter().map(|s| s.at_secs).collect();
        let from = fit_start(&at);
        // A fit that starts inside the first minute measures the warm-up, not a leak.
        let judged = at.get(from).is_some_and(|t| *t >= WARM_SECS);
        println!(
            "memory per process (growth fitted over {} samples from t = {:.0} s):",
            at.len().saturating_sub(from),
            at.get(from).copied().unwrap_or(0.0)
        );
        let mut grown = Vec::new();
        let mut unknown = Vec::new();
        for (i, service) in self.services.iter().enumerate() {
            let values: Vec<u64> = self.steps.iter().map(|s| s.rss_kib[i]).collect();
            let Some(series) = Series::of(&at, &values, from) else {
                continue;
            };
            println!("  {service:<10} {}", series.line());
            match series.growth.filter(|_| judged) {
                Some(g) if g > GROWTH_TARGET_MIB_PER_10_MIN => {
                    grown.push(format!("{service} {g:+.2}"))
                }
                Some(_) => {}
                None => unknown.push(*service),
            }
        }
        println!(
            "shared servers (summed RSS of their processes, shared memory counted in each; not targets):"
        );
        for server in self
            .steps
            .first()
            .map(|s| s.servers_kib.keys())
            .into_iter()
            .flatten()
        {
            let values: Vec<u64> = self
                .steps
                .iter()
                .map(|s| s.servers_kib.get(server).copied().unwrap_or(0))
                .collect();
            if let Some(series) = Series::of(&at, &values, from) {
                println!("  {:<10} {}", server.name(), series.line());
            }
        }
        let over_idle: Vec<String> = self
            .services
            .iter()
            .zip(&self.idle_kib)
            .filter(|(_, k)| mib(**k) >= IDLE_TARGET_MIB)
            .map(|(s, k)| format!("{s} {:.1} MiB", mib(*k)))
            .collect();
        println!(
            "target growth at most {GROWTH_TARGET_MIB_PER_10_MIN} MiB/10 min: {}",
            verdict(&grown, &unknown)
        );
        println!(
            "target idle under {IDLE_TARGET_MIB} MiB: {}",
            verdict(&over_idle, &[])
        );
        let mut sum = Figures::default();
        for f in self.steps.iter().map(|s| &s.figures) {
            sum.sent += f.sent;
            sum.answered += f.answered;
            sum.failed_with_answer += f.failed_with_answer;
            sum.refused += f.refused;
            sum.wrong += f.wrong;
            sum.lost += f.lost;
        }
        println!(
            "ledger: {} sent, {} answered, {} failed with an answer, {} refused, {} wrong, {} lost",
            sum.sent, sum.answered, sum.failed_with_answer, sum.refused, sum.wrong, sum.lost
        );
        println!("machine at the end: {}", self.machine);
    }
}

/// "met", or what broke the target, or that the soak was too short to tell.
fn verdict(broken: &[String], unknown: &[&str]) -> String {
    if !broken.is_empty() {
        format!("NOT met ({})", broken.join(", "))
    } else if !unknown.is_empty() {
        format!(
            "not judged (no fit after the first minute for {})",
            unknown.join(", ")
        )
    } else {
        "met".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_is_the_least_squares_slope_per_ten_minutes() {
        // 0.5 MiB a minute is 5 MiB per 10 minutes, whatever the offset.
        let line: Vec<(f64, f64)> = (1..=10)
            .map(|m| (m as f64 * 60.0, 40.0 + m as f64 * 0.5))
            .collect();
        assert!((growth_per_10_min(&line).unwrap() - 5.0).abs() < 1e-9);
        let flat: Vec<(f64, f64)> = (1..=5).map(|m| (m as f64 * 60.0, 30.0)).collect();
        assert_eq!(growth_per_10_min(&flat), Some(0.0));
        // Noise around a line: points (0,0), (1,2), (2,1), (3,3) fit slope 0.8 per second.
        let noisy = [(0.0, 0.0), (1.0, 2.0), (2.0, 1.0), (3.0, 3.0)];
        assert!((growth_per_10_min(&noisy).unwrap() - 0.8 * 600.0).abs() < 1e-9);
        assert_eq!(growth_per_10_min(&[(60.0, 1.0)]), None);
        assert_eq!(growth_per_10_min(&[(60.0, 1.0), (60.0, 2.0)]), None);
    }

    #[test]
    fn the_fit_starts_after_the_first_minute_but_keeps_two_samples() {
        assert_eq!(fit_start(&[60.5, 120.7, 181.0, 241.2]), 0);
        assert_eq!(fit_start(&[30.0, 60.2, 90.4, 120.6]), 1);
        assert_eq!(
            fit_start(&[2.0, 4.0, 6.0]),
            1,
            "a short soak fits its last two"
        );
        assert_eq!(fit_start(&[2.0]), 0);
        assert_eq!(fit_start(&[]), 0);
    }

    #[test]
    fn a_series_reports_its_first_fitted_sample_end_and_maximum() {
        let at = [30.0, 60.0, 90.0, 120.0];
        let kib = [50 * 1024, 40 * 1024, 41 * 1024, 42 * 1024];
        let s = Series::of(&at, &kib, 1).unwrap();
        assert_eq!(
            (s.first_at, s.first, s.end, s.max),
            (60.0, 40.0, 42.0, 50.0)
        );
        assert!((s.growth.unwrap() - 20.0).abs() < 1e-9, "1 MiB per 30 s");
        assert!(Series::of(&[], &[], 0).is_none());
    }
}
