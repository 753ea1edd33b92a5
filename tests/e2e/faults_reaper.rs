//! A fault run killed with `kill -9` (as a test runner's timeout kills it) leaves nothing
//! behind: its fleet processes die with it, through the reaper it starts first
//! (services/bench/src/reaper.rs; docs/faults.md, "Clustered servers").

use std::time::Duration;

use hermes_testkit::TestEnv;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The processes whose environment names the fault run's namespace.
fn processes_of(ns: &str) -> Vec<u32> {
    let needle = format!("HERMES_NAMESPACE={ns}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == needle.as_bytes()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_run_killed_with_kill_9_leaves_no_process_behind() {
    let env = TestEnv::new().await;
    let mut bench = env
        .command()
        .args(["bench", "faults", "--messages", "100000", "--rate", "5"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(bench.stderr.take().unwrap()).lines();
    let mut ns = None;
    // The fleet is up once the load has begun: its first progress lines follow the start.
    let started = tokio::time::timeout(Duration::from_secs(180), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some((_, n)) = line.split_once(", namespace ") {
                ns = Some(n.trim().to_string());
            }
            // `faults: <time> starting 8 processes (logs in …)`
            if line.starts_with("faults: ") && line.contains(" processes (logs in ") {
                break;
            }
        }
    })
    .await;
    assert!(started.is_ok(), "the fault run never started its fleet");
    let ns = ns.expect("the run names its namespace");
    // Started one by one: wait until all five have their process.
    assert!(
        until(Duration::from_secs(120), || processes_of(&ns).len() >= 5).await,
        "the fleet's five processes never ran"
    );
    bench.start_kill().unwrap();
    bench.wait().await.unwrap();
    assert!(
        until(Duration::from_secs(60), || processes_of(&ns).is_empty()).await,
        "left behind: {:?}",
        processes_of(&ns)
    );
}

/// Check `holds` every 100 ms until it does (true) or `bound` has passed (false).
async fn until(bound: Duration, holds: impl Fn() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + bound;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    while tokio::time::Instant::now() < deadline {
        tick.tick().await;
        if holds() {
            return true;
        }
    }
    false
}

/// A fault run past its `--deadline-secs` gives up on its own: it fails, says which step it
/// had reached, and cleans up like any failed run (docs/faults.md, "Clustered servers").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_run_past_its_deadline_names_its_step_and_leaves_nothing() {
    let env = TestEnv::new().await;
    let (code, _, stderr) = env
        .hermes(&[
            "bench",
            "faults",
            "--messages",
            "100000",
            "--rate",
            "5",
            "--deadline-secs",
            "3",
        ])
        .await;
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("gave up after 3 s (--deadline-secs); the last step: "),
        "{stderr}"
    );
    let ns = stderr
        .lines()
        .find_map(|l| {
            l.split_once(", namespace ")
                .map(|(_, n)| n.trim().to_string())
        })
        .expect("the run names its namespace");
    assert!(
        until(Duration::from_secs(60), || processes_of(&ns).is_empty()).await,
        "left behind: {:?}",
        processes_of(&ns)
    );
}
