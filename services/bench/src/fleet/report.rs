//! The report of `hermes bench fleet`: each subject's medians over the rounds, what every
//! process and the infrastructure spent per answer, and with `--with-floor` the fleet's
//! figures as ratios to the floor's (docs/performance.md, "The floor").

use std::collections::BTreeMap;

use super::load::Kind;
use super::search::ms;
use super::{FLOOR, Round, infra};
use crate::stats::{Ratio, Target, median};

/// Print each kind's medians over the rounds, then the cost per process.
pub(crate) fn report(results: &BTreeMap<String, Vec<Round>>) {
    println!(
        "{:<12} {:>7} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "kind", "rounds", "frontier/s", "rate/s", "p50 ms", "p99 ms", "p99.9 ms"
    );
    for (kind, rounds) in results {
        let m = |f: &dyn Fn(&Round) -> f64| median(rounds.iter().map(f).collect());
        let frontier = if rounds.iter().any(|r| r.frontier.is_some()) {
            format!("{:.0}", m(&|r| r.frontier.unwrap_or(0.0)))
        } else {
            "-".into()
        };
        println!(
            "{:<12} {:>7} {:>12} {:>10.0} {:>10.1} {:>10.1} {:>10.1}",
            kind,
            rounds.len(),
            frontier,
            m(&|r| r.rate),
            m(&|r| ms(r.figures.p50)),
            m(&|r| ms(r.figures.p99)),
            m(&|r| ms(r.figures.p999)),
        );
    }
    println!("CPU ms per answer (median over rounds) and RSS at the end, per process:");
    for (kind, rounds) in results {
        let Some(last) = rounds.last() else { continue };
        let cells: Vec<String> = last
            .per_process
            .iter()
            .enumerate()
            .map(|(i, (service, _, rss))| {
                let cpu = median(
                    rounds
                        .iter()
                        .filter_map(|r| r.per_process.get(i))
                        .map(|p| p.1)
                        .collect(),
                );
                format!("{service} {cpu:.2} ms {:.1} MiB", *rss as f64 / 1024.0)
            })
            .collect();
        println!("  {kind:<12} {}", cells.join(", "));
    }
    against_telegram(results);
    report_infra(results);
}

/// The chat kinds' ingest CPU per webhook as a ratio to Telegram's in the same run (medians
/// over the rounds): what each platform's verification and parsing cost beside the first.
fn against_telegram(results: &BTreeMap<String, Vec<Round>>) {
    let ingest = |rounds: &[Round]| {
        let each: Vec<f64> = (rounds.iter())
            .filter_map(|r| r.per_process.iter().find(|p| p.0 == "ingest"))
            .map(|p| p.1)
            .collect();
        (!each.is_empty()).then(|| median(each))
    };
    let Some(telegram) = results.get("telegram").and_then(|r| ingest(r)) else {
        return;
    };
    let cells: Vec<String> = (results.iter())
        .filter(|(kind, _)| Kind::chat_kind(kind) && *kind != "telegram")
        .filter_map(|(kind, rounds)| ingest(rounds).map(|v| (kind, v)))
        .map(|(kind, v)| format!("{kind} {v:.2} ms (×{:.2})", v / telegram.max(f64::EPSILON)))
        .collect();
    if !cells.is_empty() {
        println!(
            "Ingest CPU per webhook against Telegram's {telegram:.2} ms: {}",
            cells.join(", ")
        );
    }
}

/// Print what the infrastructure spent per answer, each figure the median over the rounds.
fn report_infra(results: &BTreeMap<String, Vec<Round>>) {
    println!(
        "Infrastructure per answer (median over rounds; the servers' CPU and WAL include \
         anything else they served meanwhile):"
    );
    for (kind, rounds) in results {
        let m = |f: &dyn Fn(&infra::PerAnswer) -> f64| {
            median(rounds.iter().map(|r| f(&r.infra)).collect())
        };
        let cpu: Vec<String> = rounds
            .first()
            .map(|r| r.infra.cpu_ms.iter().map(|(s, _)| *s).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, server)| {
                let v = m(&|p| p.cpu_ms.get(i).map_or(0.0, |c| c.1));
                format!("{} {v:.2} ms", server.name())
            })
            .collect();
        let statements = if rounds.iter().all(|r| r.infra.statements.is_some()) {
            format!("{:.1}", m(&|p| p.statements.unwrap_or(0.0)))
        } else {
            "n/a (pg_stat_statements not loaded)".into()
        };
        println!(
            "  {kind:<12} CPU {}; PostgreSQL {:.1} transactions, {statements} statements, \
             {:.1} rows written, {:.0} WAL bytes; {:.1} broker publishes, {:.1} run stream reads",
            cpu.join(", "),
            m(&|p| p.transactions),
            m(&|p| p.rows_written),
            m(&|p| p.wal_bytes),
            m(&|p| p.publishes),
            m(&|p| p.stream_reads),
        );
    }
}

/// The fleet's figures as ratios to the floor's, each the median over the rounds: the
/// frontier (target: at least 70 % of the floor's) and the p50 of requests sent one at a
/// time (target: at most 1.5 times the floor's). The floor replays an API chat completion's
/// hops, so the targets are judged on `chat`; the other kinds are shown beside it.
pub(crate) fn ratios(results: &BTreeMap<String, Vec<Round>>) {
    let Some(floor) = results.get(FLOOR) else {
        return;
    };
    let m = |rounds: &[Round], f: &dyn Fn(&Round) -> Option<f64>| -> Option<f64> {
        let values: Vec<f64> = rounds.iter().filter_map(f).collect();
        (!values.is_empty()).then(|| median(values))
    };
    let frontier = |r: &Round| r.frontier;
    let serial = |r: &Round| r.serial_p50.map(ms);
    let floor_frontier = m(floor, &frontier);
    let floor_serial = m(floor, &serial);
    println!(
        "Against the floor (the same hops with no Hermes logic; medians over the rounds; \
         targets judged on chat):"
    );
    println!(
        "{:<12} {:>12} {:>12} {:>14} {:>14} {:>14} {:>14}",
        "kind", "frontier/s", "floor/s", "ratio", "1-at-a-time", "floor p50", "ratio"
    );
    for (kind, rounds) in results.iter().filter(|(k, _)| *k != FLOOR) {
        let cell =
            |v: Option<f64>, unit: &str| v.map_or("-".to_string(), |v| format!("{v:.1}{unit}"));
        let ratio = |measured: Option<f64>, floor: Option<f64>, target: Target| {
            let (Some(measured), Some(floor)) = (measured, floor) else {
                return "-".to_string();
            };
            let r = Ratio {
                measured,
                floor,
                target,
            };
            let verdict = match (*kind == "chat", r.meets()) {
                (false, _) => "",
                (true, true) => " met",
                (true, false) => " not met",
            };
            format!("{}{verdict}", r.value_text(false))
        };
        let f = m(rounds, &frontier);
        let s = m(rounds, &serial);
        println!(
            "{:<12} {:>12} {:>12} {:>14} {:>14} {:>14} {:>14}",
            kind,
            cell(f, ""),
            cell(floor_frontier, ""),
            ratio(f, floor_frontier, Target::AtLeast(0.70)),
            cell(s, " ms"),
            cell(floor_serial, " ms"),
            ratio(s, floor_serial, Target::AtMost(1.5)),
        );
    }
}
