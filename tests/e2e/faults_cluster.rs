//! The fault harness on clustered servers of its own (docs/faults.md, "Clustered servers"):
//! a 3-node broker, a PostgreSQL primary with a synchronous standby, two processes of every
//! service, through a broker leader's kill, a failover and a stall of commits. It runs alone
//! (`.config/nextest.toml`).

use hermes_testkit::TestEnv;

use crate::faults::{every_channel_answered, harness};

/// The harness on clustered servers of its own (a 3-node broker, a PostgreSQL primary with a
/// synchronous standby, two processes of every service): the node leading the stages' queues
/// killed and restarted, the primary stopped hard and its standby promoted, and a promoted
/// primary left without its required standby. Short versions of docs/faults.md, "Clustered
/// servers": the ledger adds up through all three, readiness is red while commits wait,
/// every queue had its three members, and no server outlives the run.
// It once hung in a full suite with no word from the harness (its output was read only at its
// end). Every wait of the harness is bounded now, the run gives up at `--deadline-secs` naming
// its last step, and its lines are passed on as they come (docs/faults.md, "Clustered servers").
#[tokio::test(flavor = "multi_thread")]
async fn the_standalone_harness_survives_a_leader_kill_and_a_failover_on_clustered_servers() {
    let env = TestEnv::new().await;
    let (stdout, stderr) = harness(
        &env,
        &[
            "--servers",
            "cluster",
            "--messages",
            "300",
            "--rate",
            "20",
            "--users",
            "10",
            // The stall first, while the load runs: readiness is red only while some commit
            // waits, and commits wait only while there is work.
            "--fault",
            "pg-no-standby,rabbit-leader,pg-failover",
            "--count",
            "1",
            // Long enough for a commit to wait past hermes_db::COMMIT_WAIT_NOT_READY.
            "--down-secs",
            "20",
            // Within the test's own limit (.config/nextest.toml), so that a run that cannot
            // finish says where it stood and cleans up.
            "--deadline-secs",
            "420",
        ],
    )
    .await;
    assert!(stdout.contains(" | lost 0 | "), "{stdout}");
    assert!(every_channel_answered(&stdout), "{stdout}");
    // While the promoted primary waits for a standby, no process says it is ready.
    let stall = stdout
        .split("/readyz while commits wait: ")
        .nth(1)
        .and_then(|rest| rest.split(": first answer").next())
        .expect("the harness read /readyz during the stall");
    let (readiness, doctor) = stall
        .split_once("; doctor: ")
        .expect("the harness ran hermes doctor during the stall");
    assert!(
        readiness.split(", ").all(|p| !p.ends_with(" 200")),
        "{readiness}"
    );
    // And `hermes doctor` names the cause.
    assert!(
        doctor.contains("[FAIL] durability") && doctor.contains("none is connected"),
        "{doctor}"
    );
    assert!(stdout.contains("doubled sends 0"), "{stdout}");
    assert!(stderr.contains("quorum queues have 3 members"), "{stderr}");
    assert!(stdout.contains("kill -9 of broker node"), "{stdout}");
    assert!(stdout.contains("standby promoted"), "{stdout}");
    let dir = stderr
        .lines()
        .find_map(|l| l.split_once(" synchronous standby under ").map(|(_, d)| d))
        .expect("the harness names its directory")
        .trim()
        .to_string();
    assert!(
        !std::path::Path::new(&dir).join("cluster").exists(),
        "{dir}/cluster is left behind"
    );
}
