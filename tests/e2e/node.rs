//! Running the official SDKs' scripts (tests/mcp, tests/openai) with node: whether node is
//! there (a machine without it skips those tests, said on stderr), and one script run to
//! its end within a bound, its success asserted.

use std::path::Path;
use std::time::Duration;

/// Whether `node` runs on this machine.
pub(crate) async fn present() -> bool {
    tokio::process::Command::new("node")
        .arg("--version")
        .output()
        .await
        .is_ok_and(|o| o.status.success())
}

/// Run `script` in `dir` with `vars`, within `bound`; its standard output once it exited 0.
pub(crate) async fn run(
    dir: &Path,
    script: &str,
    vars: &[(&str, String)],
    bound: Duration,
) -> String {
    let run = tokio::process::Command::new("node")
        .arg(script)
        .current_dir(dir)
        .envs(vars.iter().map(|(k, v)| (*k, v.as_str())))
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(bound, run)
        .await
        .expect("the SDK script ends")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed:\n{stdout}\n{stderr}");
    stdout
}
