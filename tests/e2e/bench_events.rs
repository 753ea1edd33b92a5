//! `hermes bench events` cannot rot: a short run must see every timed message come back
//! through `events_wait` as itself (the bench fails otherwise) and print both figures
//! (docs/performance.md, "Operator events"). The figures themselves are never asserted.

use hermes_testkit::TestEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_run_prints_both_figures() {
    let env = TestEnv::new().await;
    let (code, stdout, stderr) = env
        .hermes(&["bench", "events", "--messages", "6", "--rounds", "2"])
        .await;
    assert_eq!(code, 0, "bench events failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("6 messages a measurement"), "{stdout}");
    for line in ["webhook -> events_wait", "webhook 200 (baseline)"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(line) && l.contains("p99")),
            "no figures for {line}:\n{stdout}"
        );
    }
}
