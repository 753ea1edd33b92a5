//! The benches' floors cannot rot (docs/performance.md, Ingest and Router): a tiny
//! `hermes bench router --with-floor` prints the router's rate and pgbench's replay of its
//! statements, and `hermes bench ingest --floor-only` prints the raw publish's frontier and
//! p99. Only that each figure is there and above zero is checked, never a timing.

use hermes_testkit::TestEnv;

/// The numbers on the line of `stdout` that starts with `label`.
fn figures(stdout: &str, label: &str) -> Vec<f64> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no line {label:?}:\n{stdout}"));
    line[label.len()..]
        .split_whitespace()
        .filter_map(|w| w.trim_end_matches(['%', '×']).parse::<f64>().ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_and_its_pgbench_floor_are_both_measured() {
    let env = TestEnv::new().await;
    let (code, stdout, stderr) = env
        .hermes(&[
            "bench",
            "router",
            "--messages",
            "200",
            "--users",
            "20",
            "--facts",
            "2",
            "--dims",
            "8",
            "--with-floor",
            "--rounds",
            "1",
            "--floor-secs",
            "2",
            "--floor-clients",
            "4",
        ])
        .await;
    assert_eq!(code, 0, "bench router failed:\n{stdout}\n{stderr}");
    let row = figures(&stdout, "messages/s ÷ pgbench, one message per transaction");
    // router messages/s, pgbench messages/s, the ratio (then the target).
    assert!(row.len() >= 3, "{row:?}\n{stdout}");
    assert!(row[..3].iter().all(|v| *v > 0.0), "{row:?}\n{stdout}");
    assert!(
        stdout.contains("messages/s ÷ pgbench, commit groups of"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_raw_publish_floor_of_ingest_is_measured_alone() {
    let env = TestEnv::new().await;
    let (code, stdout, stderr) = env
        .hermes(&[
            "bench",
            "ingest",
            "--floor-only",
            "--secret",
            "unused",
            "--rounds",
            "1",
            "--start-rate",
            "50",
            "--max-rate",
            "100",
            "--step-secs",
            "1",
            "--duration",
            "1",
            "--p99-bound-ms",
            "10000",
        ])
        .await;
    assert_eq!(
        code, 0,
        "bench ingest --floor-only failed:\n{stdout}\n{stderr}"
    );
    let frontier = figures(&stdout, "frontier (per second)");
    assert!(frontier.first().is_some_and(|v| *v > 0.0), "{stdout}");
    let p99 = figures(&stdout, "p99 ms at");
    assert!(p99.last().is_some_and(|v| *v > 0.0), "{stdout}");
}
