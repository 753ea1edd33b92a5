//! `hermes bench abuse` cannot rot: a short run attacks a real fleet with every attack,
//! prints a row of figures for each and the Redis bytes per chat run by platform, and
//! leaves nothing on the broker (docs/security.md, "Abuse"). The figures themselves are
//! never asserted.

use hermes_testkit::TestEnv;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_run_prints_every_attack_and_the_redis_bytes() {
    let env = TestEnv::new().await;
    let (code, stdout, stderr) = env
        .hermes(&[
            "bench",
            "abuse",
            "--rounds",
            "1",
            "--secs",
            "1",
            "--connections",
            "20",
            "--redis-runs",
            "2",
        ])
        .await;
    assert_eq!(code, 0, "bench abuse failed:\n{stdout}\n{stderr}");
    for attack in ["slow-bodies", "unknown-keys", "images", "held-callers"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(attack) && l.contains(" ms ") && l.contains('%')),
            "no figures for {attack}:\n{stdout}"
        );
    }
    for platform in ["telegram", "whatsapp", "api chat"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.trim_start().starts_with(platform) && l.ends_with("bytes")),
            "no Redis bytes for {platform}:\n{stdout}"
        );
    }
    assert!(
        !stderr.contains("cannot delete") && !stderr.contains("cannot reach the broker"),
        "the bench left its queues behind:\n{stderr}"
    );
}
