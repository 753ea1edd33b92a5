//! `hermes bench console` cannot rot: a short run over a small seeded database must fetch
//! every page with `200` and print each page's figures beside its floor (docs/performance.md,
//! "The console"). The figures themselves are never asserted.

use hermes_testkit::TestEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_run_prints_every_page_beside_its_floor() {
    let env = TestEnv::new().await;
    let (code, stdout, stderr) = env
        .hermes(&[
            "bench",
            "console",
            "--runs",
            "500",
            "--users",
            "50",
            "--requests",
            "2",
            "--rounds",
            "2",
        ])
        .await;
    assert_eq!(code, 0, "bench console failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("500 runs, 50 users"), "{stdout}");
    for page in [
        "overview",
        "runs",
        "runs of a user",
        "runs, last hour",
        "users",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("{page:<16}")) && l.split_whitespace().count() >= 7),
            "no figures for {page}:\n{stdout}"
        );
    }
}
