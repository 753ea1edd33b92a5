//! `hermes bench fleet` cannot rot: a short run at a fixed rate through the fleet as separate
//! processes must keep its ledger (every request answered as itself, once), whatever the
//! figures (docs/performance.md), and so must the floor it is compared with (`--with-floor`).
//! The figures themselves are never asserted.

use hermes_testkit::TestEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_fixed_rate_run_keeps_its_ledger() {
    let env = TestEnv::new().await;
    let (code, stdout, stderr) = env
        .hermes(&[
            "bench",
            "fleet",
            "--rate",
            "10",
            "--duration",
            "3",
            "--rounds",
            "1",
            "--kind",
            "chat,chat-stream,responses,runs,telegram",
            "--with-floor",
            "--serial",
            "5",
        ])
        .await;
    assert_eq!(code, 0, "bench fleet failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("the ledger adds up"), "{stdout}");
    assert!(stdout.contains("Against the floor"), "no ratios:\n{stdout}");
    for kind in [
        "chat ",
        "chat-stream ",
        "responses ",
        "runs ",
        "telegram ",
        "floor ",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(kind)),
            "no figures for {kind}:\n{stdout}"
        );
        // The infrastructure's share is counted, not guessed: every answer went through the
        // broker and PostgreSQL at least once.
        let infra = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(kind) && l.contains("broker publishes"))
            .unwrap_or_else(|| panic!("no infrastructure figures for {kind}:\n{stdout}"));
        let before = |unit: &str| -> f64 {
            let at = infra.find(unit).expect(unit);
            infra[..at]
                .split_whitespace()
                .last()
                .unwrap()
                .parse()
                .unwrap()
        };
        assert!(before(" broker publishes") >= 1.0, "{infra}");
        if kind == "floor " {
            // The floor publishes what an API chat completion does: to the router, the llm
            // stage and delivery.
            assert!(before(" broker publishes") >= 3.0, "{infra}");
        }
        assert!(before(" transactions") >= 1.0, "{infra}");
    }
}
