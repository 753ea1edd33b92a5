//! The real `hermes` binary and what it runs next to it (ports, MCP servers).

use std::path::PathBuf;
use std::process::Stdio;

/// The `hermes` binary built next to this test binary.
pub fn hermes_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let bin = dir.join("hermes");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p hermes`",
        bin.display()
    );
    bin
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `[mcp_servers.everything]`: the MCP reference server (`@modelcontextprotocol/server-everything`,
/// installed in `tests/mcp/` by `scripts/test`) over stdio, with `extra` keys.
pub fn everything_server_toml(extra: &str) -> String {
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        server.exists(),
        "{} is missing: run `npm ci` in tests/mcp",
        server.display()
    );
    format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n{extra}\n",
        server.display().to_string()
    )
}

impl crate::TestEnv {
    /// The real `hermes` binary with exactly this test's environment (nothing inherited but
    /// `PATH`), ready for arguments.
    pub fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(hermes_bin());
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(&self.vars);
        command
    }

    /// Run `hermes <args>`: (exit code, stdout, stderr).
    pub async fn hermes(&self, args: &[&str]) -> (i32, String, String) {
        self.hermes_with_stdin(args, "").await
    }

    /// Run `hermes <args>` with `stdin` as its input: (exit code, stdout, stderr).
    pub async fn hermes_with_stdin(&self, args: &[&str], stdin: &str) -> (i32, String, String) {
        use tokio::io::AsyncWriteExt;
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the hermes binary starts");
        let mut input = child.stdin.take().expect("stdin is piped");
        input
            .write_all(stdin.as_bytes())
            .await
            .expect("hermes reads its input");
        drop(input);
        let out = child.wait_with_output().await.expect("hermes ends");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}
