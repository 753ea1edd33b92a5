//! The fleet driven by the official OpenAI SDK, unchanged: `tests/openai/responses.mjs` (the
//! `openai` npm package, installed by `scripts/test` with `npm ci`) runs the Responses API's
//! create, stream, retrieve, chaining, image input, delete and errors against a fleet answering
//! with the built-in mock provider, and exits non-zero on any mismatch.

use std::path::PathBuf;
use std::time::Duration;

use hermes_testkit::{KEY, TestFleet};

/// Whether `node` runs here.
async fn node_present() -> bool {
    tokio::process::Command::new("node")
        .arg("--version")
        .output()
        .await
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_drives_the_responses_api() {
    if !node_present().await {
        eprintln!("SKIPPED: node is not installed; the OpenAI SDK test (tests/openai) needs it");
        return;
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openai");
    assert!(
        dir.join("node_modules/openai").exists(),
        "{} is missing: run `npm ci` in tests/openai",
        dir.join("node_modules/openai").display()
    );
    let fleet = TestFleet::builder().start().await;
    let run = tokio::process::Command::new("node")
        .arg("responses.mjs")
        .current_dir(&dir)
        .env("HERMES_API_URL", fleet.url("/v1"))
        .env("HERMES_API_KEY", KEY)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the SDK script ends")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the SDK script failed:\n{stdout}\n{stderr}"
    );
    // Every step reported itself: none was skipped.
    assert_eq!(stdout.matches("ok - ").count(), 9, "{stdout}");
    fleet.stop().await.unwrap();
}
