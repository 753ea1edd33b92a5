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
/// How long one command of a server's tools (`pg_ctl`, `psql`, `rabbitmqctl`, …) may take.
/// The slowest ones wait for a server themselves, within their own timeouts of at most 120 s.
pub(super) const COMMAND_BOUND: Duration = Duration::from_secs(180);

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

/// Start the PostgreSQL server of `data` with `opts` (`pg_ctl start -w`), its log in `log`.
/// When it does not come up, the error carries the log's last lines: `pg_ctl` itself says
/// only "Examine the log output", and the run's directory is gone by the time anyone looks.
pub(super) fn start_postgres(
    pg_bin: &Path,
    data: &Path,
    log: &Path,
    opts: &str,
) -> anyhow::Result<()> {
    let started = run(as_user(
        "postgres",
        pg_bin.join("pg_ctl"),
        &[
            "-D",
            &data.to_string_lossy(),
            "-l",
            &log.to_string_lossy(),
            "-o",
            opts,
            "-w",
            "-t",
            "60",
            "start",
        ],
    ));
    started.map_err(|e| {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
        e.context(format!("its log ({}) ends:\n{tail}", log.display()))
    })
}

/// How many of a server's last log lines an error about its start carries.
const LOG_TAIL_LINES: usize = 20;

/// Run `cmd` to its end; an error holds its output when it fails.
pub(super) fn run(cmd: Command) -> anyhow::Result<()> {
    let (program, out) = finish(cmd, COMMAND_BOUND)?;
    if !out.status.success() {
        bail!(
            "{program} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Run `cmd` and return what it printed, when it succeeded.
pub(super) fn output(cmd: Command) -> anyhow::Result<String> {
    let (program, out) = finish(cmd, COMMAND_BOUND)?;
    if !out.status.success() {
        bail!("{program} failed ({})", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run `cmd` to its end, at most `bound` ([`COMMAND_BOUND`]): a server's tool that never answers (a
/// `rabbitmqctl` waiting on a node that is gone, a `psql` whose commit waits for a standby)
/// is killed and named, so that the run fails with the cause instead of hanging.
fn finish(mut cmd: Command, bound: Duration) -> anyhow::Result<(String, std::process::Output)> {
    let program = format!("{:?}", cmd.get_program());
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    let pid = child.id();
    let (done, waited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    match waited.recv_timeout(bound) {
        Ok(out) => Ok((program, out?)),
        Err(_) => {
            kill9(pid as i32);
            bail!(
                "{cmd:?} did not finish within {:.1} s and was killed",
                bound.as_secs_f64()
            )
        }
    }
}

/// `kill -9` of process `pid`, whoever runs it (the harness may be root and it `postgres`).
pub(super) fn kill9(pid: i32) {
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_past_its_bound_is_killed_and_named() {
        let mut sleeper = Command::new("sleep");
        sleeper.arg("30");
        let started = Instant::now();
        let err = finish(sleeper, Duration::from_millis(200)).unwrap_err();
        assert!(
            err.to_string().contains("did not finish within 0.2 s"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(30));
        let (_, out) = finish(Command::new("true"), Duration::from_secs(30)).unwrap();
        assert!(out.status.success());
    }
}
