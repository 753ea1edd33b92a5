//! The installed server programs a fault run starts servers of its own from, and how it runs
//! them: PostgreSQL and RabbitMQ as their own users when the harness is root, each command to
//! its end with its output kept for the error, and a bounded wait for a server to serve. The
//! private servers ([`super::servers`]) and the clustered ones ([`super::cluster`]) share it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// How long a private server may take to start or stop.
pub(super) const BOOT_BOUND: Duration = Duration::from_secs(90);

/// The directory of PostgreSQL's server binaries (`pg_config --bindir`, or the newest
/// Debian install).
pub(super) fn postgres_bin() -> anyhow::Result<PathBuf> {
    if let Ok(dir) = output({
        let mut c = Command::new("pg_config");
        c.arg("--bindir");
        c
    }) {
        let dir = PathBuf::from(dir.trim());
        if dir.join("pg_ctl").exists() {
            return Ok(dir);
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path().join("bin"))
                .collect()
        })
        .unwrap_or_default();
    versions.sort();
    versions
        .into_iter()
        .rev()
        .find(|d| d.join("pg_ctl").exists())
        .context(
            "--servers private needs PostgreSQL's server binaries (apt-get install postgresql)",
        )
}

/// The directory of RabbitMQ's scripts (`rabbitmq-server`, `rabbitmqctl`), unwrapped: the
/// Debian package's own directory, or wherever they are on the PATH.
pub(super) fn rabbitmq_bin() -> anyhow::Result<PathBuf> {
    let debian = PathBuf::from("/usr/lib/rabbitmq/bin");
    if debian.join("rabbitmq-server").exists() {
        return Ok(debian);
    }
    which("rabbitmq-server")
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .context("--servers private needs RabbitMQ (apt-get install rabbitmq-server)")
}

pub(super) fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(tool))
            .find(|p| p.exists())
    })
}

/// `program args` as `user` when this process is root (PostgreSQL refuses to run as root,
/// and RabbitMQ's cookie is its user's), as this user otherwise.
pub(super) fn as_user(user: &str, program: PathBuf, args: &[&str]) -> Command {
    if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", user, "--"]).arg(program).args(args);
        cmd
    } else {
        let mut cmd = Command::new(program);
        cmd.args(args);
        cmd
    }
}

pub(super) fn is_root() -> bool {
    output({
        let mut c = Command::new("id");
        c.arg("-u");
        c
    })
    .is_ok_and(|uid| uid.trim() == "0")
}

/// Hand `dir` to `user` when this process is root.
pub(super) fn own(dir: &Path, user: &str) -> anyhow::Result<()> {
    if !is_root() {
        return Ok(());
    }
    let mut cmd = Command::new("chown");
    cmd.arg("-R").arg(format!("{user}:{user}")).arg(dir);
    run(cmd)
}

/// Run `cmd` to its end; an error holds its output when it fails.
pub(super) fn run(mut cmd: Command) -> anyhow::Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{:?} failed ({}): {}{}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Run `cmd` and return what it printed, when it succeeded.
pub(super) fn output(mut cmd: Command) -> anyhow::Result<String> {
    let out = cmd.stdin(Stdio::null()).stderr(Stdio::null()).output()?;
    if !out.status.success() {
        bail!("{:?} failed ({})", cmd.get_program(), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Poll `ready` (a blocking check) until it holds, at most [`BOOT_BOUND`].
pub(super) fn wait_until(what: &str, mut ready: impl FnMut() -> bool) -> anyhow::Result<()> {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > BOOT_BOUND {
            bail!(
                "gave up waiting for {what} after {} s",
                BOOT_BOUND.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// A new PostgreSQL data directory at `data` (under `dir`, both owned by `postgres`), with
/// trust authentication and no fsync: a throw-away server of the harness's own.
pub(super) fn initdb(pg_bin: &Path, dir: &Path, data: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(data)?;
    own(dir, "postgres")?;
    run(as_user(
        "postgres",
        pg_bin.join("initdb"),
        &[
            "-D",
            &data.to_string_lossy(),
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
        ],
    ))
}
