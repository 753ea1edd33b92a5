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

/// A port nobody listens on right now, outside the range outgoing connections take theirs
/// from ([`hermes_net::ports::free_port`]).
pub fn free_port() -> u16 {
    hermes_net::ports::free_port().unwrap()
}

/// The MCP reference server's script (`@modelcontextprotocol/server-everything`, installed
/// in `tests/mcp/` by `scripts/test`): `node <it> stdio` serves MCP on stdio.
pub fn everything_server_js() -> PathBuf {
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        server.exists(),
        "{} is missing: run `npm ci` in tests/mcp",
        server.display()
    );
    server
}

/// `[mcp_servers.everything]`: the MCP reference server (`@modelcontextprotocol/server-everything`,
/// installed in `tests/mcp/` by `scripts/test`) over stdio, with `extra` keys.
pub fn everything_server_toml(extra: &str) -> String {
    let server = everything_server_js();
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

/// A `hermes` command (`all`, `ingest`, …) running as a real process of this test on free
/// ports: what SIGTERM and a real exit do can only be seen out of process (in-process, the
/// connections of an aborted server outlive it).
pub struct RealProcess {
    pub child: tokio::process::Child,
    /// Its public port (`HERMES_HTTP_ADDR`) and its admin port.
    pub http: u16,
    pub admin: u16,
}

impl RealProcess {
    /// `http://127.0.0.1:{http}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.http)
    }

    /// Its `/readyz`.
    pub fn readyz(&self) -> String {
        format!("http://127.0.0.1:{}/readyz", self.admin)
    }

    /// Send it SIGTERM.
    pub fn terminate(&self) {
        let pid = self.child.id().expect("still running").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM to {pid}");
    }
}

impl crate::TestEnv {
    /// Start `hermes <service>` as a real process with this test's environment on free ports
    /// (its log on this test's stderr), without waiting for it.
    pub fn spawn(&self, service: &str) -> RealProcess {
        let (http, admin) = (free_port(), free_port());
        let child = self
            .command()
            .arg(service)
            .env("HERMES_HTTP_ADDR", format!("127.0.0.1:{http}"))
            .env("HERMES_ADMIN_ADDR", format!("127.0.0.1:{admin}"))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("hermes starts");
        RealProcess { child, http, admin }
    }

    /// [`TestEnv::spawn`], then wait until it is ready.
    pub async fn spawn_ready(&self, service: &str) -> RealProcess {
        let process = self.spawn(service);
        process.wait_ready(std::time::Duration::from_secs(30)).await;
        process
    }
}

impl RealProcess {
    /// Its `/readyz` answer: the status and the JSON body (`None` while it does not answer).
    pub async fn readiness(&self) -> Option<(u16, serde_json::Value)> {
        let resp = reqwest::get(self.readyz()).await.ok()?;
        let status = resp.status().as_u16();
        Some((status, resp.json().await.ok()?))
    }

    /// Wait until `/readyz` answers 200, at most `limit`.
    pub async fn wait_ready(&self, limit: std::time::Duration) {
        crate::eventually(limit, "hermes ready", || async {
            (self.readiness().await?.0 == 200).then_some(())
        })
        .await;
    }
}
