//! The fleet driven by the official OpenAI SDK, unchanged (the `openai` npm package, installed
//! by `scripts/test` with `npm ci`), against a fleet answering with the built-in mock
//! provider: `tests/openai/responses.mjs` runs the Responses API's create, stream, retrieve,
//! chaining, image input, delete and errors; `tests/openai/chat.mjs` chat completions plain
//! and streamed, image input, models and errors as the SDK's exceptions. Each exits non-zero
//! on any mismatch.

use std::path::PathBuf;
use std::time::Duration;

use hermes::Service;
use hermes_testkit::{KEY, TestEnv};

/// Run `tests/openai/<script>` with node against a fresh fleet (the mock provider answers);
/// its standard output once it exited 0, or `None` when node is not installed.
async fn run_script(script: &str) -> Option<String> {
    if !crate::node::present().await {
        eprintln!("SKIPPED: node is not installed; the OpenAI SDK test (tests/openai) needs it");
        return None;
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("openai");
    assert!(
        dir.join("node_modules/openai").exists(),
        "{} is missing: run `npm ci` in tests/openai",
        dir.join("node_modules/openai").display()
    );
    let env = TestEnv::new().await;
    let fleet = env.start(&Service::ALL).await;
    let vars = [
        ("HERMES_API_URL", fleet.url("/v1")),
        ("HERMES_API_KEY", KEY.to_string()),
    ];
    let stdout = crate::node::run(&dir, script, &vars, Duration::from_secs(180)).await;
    fleet.stop().await.unwrap();
    Some(stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_drives_the_responses_api() {
    let Some(stdout) = run_script("responses.mjs").await else {
        return;
    };
    // Every step reported itself: none was skipped.
    assert_eq!(stdout.matches("ok - ").count(), 9, "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdk_drives_chat_completions() {
    let Some(stdout) = run_script("chat.mjs").await else {
        return;
    };
    assert_eq!(stdout.matches("ok - ").count(), 12, "{stdout}");
    assert!(stdout.contains("chat.mjs: all checks passed"), "{stdout}");
}
