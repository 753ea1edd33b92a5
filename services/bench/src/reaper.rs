//! What a bench leaves running dies with it, however the bench ends: a normal end, an
//! error, Ctrl-C, or a `kill -9` (a test runner's timeout) that runs no drop at all.
//!
//! The bench starts a reaper first: `hermes-bench reap --dir <run dir> --remove <servers'
//! dir>…`, a process of its own that leads a new process group and holds the read end of a
//! pipe from the bench. The fleet's processes are started into that group. When the bench
//! ends, the pipe closes and the reaper stops every server still running under the run's
//! directory (their pid files name them), removes the servers' directories (the logs beside
//! them stay, to be read), and kills its group, itself last. After a normal end the drops
//! have done all of this already and the reaper only exits.
//!
//! It is a process rather than a signal handler because nothing runs in a process killed
//! with `kill -9`, and rather than `PR_SET_PDEATHSIG` because that needs `unsafe` (which the
//! workspace forbids) and does not reach the servers, which leave their parent's session.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::process::{Child, ChildStdin, Command};

/// The reaper of one bench run. Keep it alive for the whole run: dropping it closes the pipe
/// and the reaper does its work.
pub struct Reaper {
    /// The reaper's process group, which the fleet's processes join.
    pub group: u32,
    _pipe: ChildStdin,
    _child: Child,
}

impl Reaper {
    /// Start the reaper of the run under `dir`, which removes the folders in `remove` (the
    /// servers' data) once their servers are stopped.
    pub fn start(dir: &Path, remove: &[PathBuf]) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("cannot tell where this executable is")?;
        let mut cmd = Command::new(exe);
        cmd.arg("reap").arg("--dir").arg(dir);
        for r in remove {
            cmd.arg("--remove").arg(r);
        }
        let mut child = cmd
            .process_group(0)
            .stdin(Stdio::piped())
            // Its output would hold the bench's caller's pipes open after the bench ends.
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("cannot start the reaper")?;
        let group = child.id().context("the reaper exited at once")?;
        let pipe = child.stdin.take().context("the reaper has no stdin")?;
        Ok(Self {
            group,
            _pipe: pipe,
            _child: child,
        })
    }
}

/// The reaper's own work (`hermes-bench reap`): wait for the bench to end, then clear up.
pub fn reap(dir: &Path, remove: &[PathBuf]) {
    // Returns at end of file: the bench's end of the pipe is closed, whatever ended it.
    let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    if dir.exists() {
        let pids = servers_under(dir);
        for (pid, signal) in &pids {
            signal_pid(*pid, signal);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while pids.iter().any(|(pid, _)| alive(*pid)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        for r in remove.iter().filter(|r| r.starts_with(dir)) {
            let _ = std::fs::remove_dir_all(r);
        }
    }
    // The fleet's processes, then this one: it leads the group.
    signal_pid(-(std::process::id() as i32), "-KILL");
}

/// The servers still running under `dir`, from their pid files, with the signal that stops
/// each at once: PostgreSQL's immediate shutdown (its postmaster stops its backends), a
/// `kill -9` for the others. A pid is taken only when that process works under `dir` or names
/// it, so a stale pid file never reaches a process that reused its number.
fn servers_under(dir: &Path) -> Vec<(i32, &'static str)> {
    let mut found = Vec::new();
    for file in pid_files(dir, 6) {
        let Some(pid) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
        else {
            continue;
        };
        if !names(pid, dir) {
            continue;
        }
        let signal = if file.ends_with("postmaster.pid") {
            "-QUIT"
        } else {
            "-KILL"
        };
        found.push((pid, signal));
    }
    found
}

/// Files named `pid` or `*.pid` under `dir`, at most `depth` folders down.
fn pid_files(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() && depth > 0 {
            out.extend(pid_files(&path, depth - 1));
        } else if kind.is_file() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == "pid" || name.ends_with(".pid") {
                out.push(path);
            }
        }
    }
    out
}

/// Is process `pid` one of the run's: working under `dir`, or naming it on its command line?
/// (Redis rewrites its command line; each server here works in its own directory.)
fn names(pid: i32, dir: &Path) -> bool {
    let works_here =
        std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd.starts_with(dir));
    works_here
        || std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmdline| {
            let dir = dir.to_string_lossy();
            String::from_utf8_lossy(&cmdline).contains(dir.as_ref())
        })
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// `kill <signal> <pid>` (a negative pid is a process group).
fn signal_pid(pid: i32, signal: &str) {
    let _ = std::process::Command::new("kill")
        .args([signal, "--", &pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_files_are_found_below_the_run_directory_only_by_their_names() {
        let dir = std::env::temp_dir().join(format!("reaper-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(dir.join("cluster/rabbit-1")).unwrap();
        std::fs::create_dir_all(dir.join("cluster/pg/node-0")).unwrap();
        std::fs::write(dir.join("cluster/rabbit-1/pid"), "1\n").unwrap();
        std::fs::write(dir.join("cluster/pg/node-0/postmaster.pid"), "1\n/x\n").unwrap();
        std::fs::write(dir.join("cluster/pg/node-0/postgresql.conf"), "").unwrap();
        let mut found = pid_files(&dir, 6);
        found.sort();
        assert_eq!(
            found,
            vec![
                dir.join("cluster/pg/node-0/postmaster.pid"),
                dir.join("cluster/rabbit-1/pid")
            ]
        );
        // pid 1 does not name the directory: nothing of it is signalled.
        assert!(servers_under(&dir).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
