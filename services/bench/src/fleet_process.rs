//! The fleet under test as separate `hermes` processes, each with its own admin port and log
//! file, that a fault kills (`kill -9`), stops (SIGTERM) and restarts as Kubernetes would;
//! where the benches find the `hermes` binary (they are a binary of their own, so the fleet
//! is not this executable), and how they read the fleet's streamed answers. The faults, fleet
//! and abuse benches share it, which is why it sits beside them rather than in one.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::{Child, Command};

/// One process of the fleet.
pub struct Proc {
    pub service: &'static str,
    pub admin: u16,
    /// Its own environment, over the fleet's (a second ingest's listen address).
    own_env: Vec<(String, String)>,
    child: Option<Child>,
    log: PathBuf,
    /// Times it was started (the first start included).
    pub starts: u32,
    /// When it was last started.
    started: Option<Instant>,
}

/// The running fleet.
pub struct Fleet {
    pub procs: Vec<Proc>,
    env: Vec<(String, String)>,
    /// The `hermes` binary every process runs.
    bin: PathBuf,
    /// The process group the processes join (a [`crate::reaper::Reaper`]'s), if any.
    group: Option<u32>,
}

/// The `hermes` binary the benches start: `HERMES_BIN` when set, else `hermes` next to this
/// executable (where `cargo build -p hermes -p hermes-bench` puts both, and where an install
/// puts them side by side).
pub fn hermes_binary() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot tell where this executable is")?;
    find_hermes(std::env::var_os("HERMES_BIN"), &exe)
}

/// [`hermes_binary`] with its inputs given, so a test can try each case.
fn find_hermes(var: Option<OsString>, exe: &Path) -> anyhow::Result<PathBuf> {
    let beside = exe.with_file_name("hermes");
    if let Some(var) = var {
        let bin = PathBuf::from(var);
        if bin.is_file() {
            return Ok(bin);
        }
        bail!(
            "HERMES_BIN={} is not a file: point it at the hermes binary, or unset it to use {}",
            bin.display(),
            beside.display()
        );
    }
    if beside.is_file() {
        return Ok(beside);
    }
    bail!(
        "the hermes binary is not at {} and HERMES_BIN is not set: build it with \
         `cargo build -p hermes`, or set HERMES_BIN to its path",
        beside.display()
    )
}

/// A free loopback port for a server the harness starts (docs/faults.md): below the
/// ephemeral range, so no outgoing connection takes it before the server binds it.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(hermes_net::ports::free_port()?)
}

impl Fleet {
    /// Start `services` (one process each, in order) with `env`, logs under `logs`, and wait
    /// until every one is ready.
    pub async fn start(
        services: &[&'static str],
        env: Vec<(String, String)>,
        logs: &Path,
    ) -> anyhow::Result<Self> {
        Self::start_each(services, env, logs, |_| Vec::new(), None).await
    }

    /// [`Fleet::start`], with `own_env(i)` added to process `i`'s environment (over the
    /// fleet's): two ingest processes on two addresses behind one Service, for example.
    /// With a `group`, every process joins that process group (a reaper's, so that the
    /// processes die with the bench even when it is killed).
    pub async fn start_each(
        services: &[&'static str],
        env: Vec<(String, String)>,
        logs: &Path,
        own_env: impl Fn(usize) -> Vec<(String, String)>,
        group: Option<u32>,
    ) -> anyhow::Result<Self> {
        let mut fleet = Self {
            procs: Vec::new(),
            env,
            bin: hermes_binary()?,
            group,
        };
        for (i, service) in services.iter().enumerate() {
            fleet.procs.push(Proc {
                service,
                admin: free_port()?,
                own_env: own_env(i),
                child: None,
                log: logs.join(format!("{i:02}-{service}.log")),
                starts: 0,
                started: None,
            });
        }
        for i in 0..fleet.procs.len() {
            fleet.spawn(i)?;
        }
        for i in 0..fleet.procs.len() {
            fleet.ready(i).await?;
        }
        Ok(fleet)
    }

    /// A one-off `hermes` command (`doctor`, say) with the fleet's environment, its output
    /// piped; killed if dropped unfinished.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    fn spawn(&mut self, i: usize) -> anyhow::Result<()> {
        let p = &mut self.procs[i];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p.log)?;
        let mut cmd = Command::new(&self.bin);
        cmd.arg(p.service)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(p.own_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("HERMES_ADMIN_ADDR", format!("127.0.0.1:{}", p.admin))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        if let Some(group) = self.group {
            cmd.process_group(group as i32);
        }
        p.child = Some(
            cmd.spawn()
                .with_context(|| format!("start {}", p.service))?,
        );
        p.starts += 1;
        p.started = Some(Instant::now());
        Ok(())
    }

    /// Start again every process that exited on its own (as a process does when a server
    /// stays away past its bound: docs/operations.md), at most once a second each, as
    /// Kubernetes restarts a pod's container; returns a line for each.
    pub fn revive(&mut self) -> Vec<String> {
        let mut revived = Vec::new();
        for i in 0..self.procs.len() {
            let p = &mut self.procs[i];
            let recent = p
                .started
                .is_some_and(|t| t.elapsed() < Duration::from_secs(1));
            let Some(status) = p.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) else {
                continue;
            };
            if recent {
                continue;
            }
            let service = p.service;
            p.child = None;
            match self.spawn(i) {
                Ok(()) => {
                    revived.push(format!("{service} exited on its own ({status}), restarted"))
                }
                Err(e) => revived.push(format!(
                    "{service} exited on its own ({status}), restart failed: {e:#}"
                )),
            }
        }
        for line in &revived {
            eprintln!("faults: {line}");
        }
        revived
    }

    /// Wait for process `i`'s `/readyz` (60 s at most).
    async fn ready(&mut self, i: usize) -> anyhow::Result<()> {
        let url = format!("http://127.0.0.1:{}/readyz", self.procs[i].admin);
        let started = Instant::now();
        let mut poll = tokio::time::interval(Duration::from_millis(100));
        loop {
            poll.tick().await;
            if reqwest::get(&url)
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(());
            }
            let p = &mut self.procs[i];
            if let Some(child) = p.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                bail!(
                    "{} exited during start ({status}); see {}",
                    p.service,
                    p.log.display()
                );
            }
            if started.elapsed() > Duration::from_secs(60) {
                bail!(
                    "{} not ready within 60 s; see {}",
                    p.service,
                    p.log.display()
                );
            }
        }
    }

    /// `kill -9` process `i`, then start it again and wait until it is ready.
    pub async fn kill_and_restart(&mut self, i: usize) -> anyhow::Result<()> {
        if let Some(mut child) = self.procs[i].child.take() {
            child.start_kill()?;
            child.wait().await?;
        }
        self.spawn(i)?;
        self.ready(i).await
    }

    /// SIGTERM process `i`, wait for it to exit (at most `bound`, then `kill -9`), then start
    /// it again. Returns whether it exited cleanly within the bound.
    pub async fn stop_and_restart(&mut self, i: usize, bound: Duration) -> anyhow::Result<bool> {
        let mut clean = false;
        if let Some(mut child) = self.procs[i].child.take() {
            if let Some(pid) = child.id() {
                let _ = Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status()
                    .await;
            }
            clean = match tokio::time::timeout(bound, child.wait()).await {
                Ok(Ok(status)) => status.success(),
                _ => {
                    child.start_kill()?;
                    child.wait().await?;
                    false
                }
            };
        }
        self.spawn(i)?;
        self.ready(i).await?;
        Ok(clean)
    }

    /// The service and process id of every running process.
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        self.procs
            .iter()
            .filter_map(|p| Some((p.service, p.child.as_ref()?.id()?)))
            .collect()
    }

    /// The admin port of every process (its `/metrics`).
    pub fn admin_ports(&self) -> Vec<u16> {
        self.procs.iter().map(|p| p.admin).collect()
    }

    /// Start again every process that is stopped (after [`Fleet::stop_all`]), on the same
    /// admin ports and with the same environment, and wait until each is ready.
    pub async fn start_again(&mut self) -> anyhow::Result<()> {
        for i in 0..self.procs.len() {
            if self.procs[i].child.is_none() {
                self.spawn(i)?;
            }
        }
        for i in 0..self.procs.len() {
            self.ready(i).await?;
        }
        Ok(())
    }

    /// Stop every process (SIGTERM, then `kill -9` after 15 s).
    pub async fn stop_all(&mut self) {
        for p in &mut self.procs {
            if let Some(mut child) = p.child.take() {
                if let Some(pid) = child.id() {
                    let _ = Command::new("kill")
                        .args(["-TERM", &pid.to_string()])
                        .status()
                        .await;
                }
                if tokio::time::timeout(Duration::from_secs(15), child.wait())
                    .await
                    .is_err()
                {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
            }
        }
    }
}

/// Every server-sent event of `resp` as `(event name, data)`, until the body ends.
pub async fn read_sse(mut resp: reqwest::Response) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut buffer = String::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut event = String::from("message");
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event: ") {
                    event = name.to_string();
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push(d);
                }
            }
            if !data.is_empty() {
                out.push((event, data.join("\n")));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hermes_is_found_from_the_variable_or_beside_this_executable() {
        let dir = std::env::temp_dir().join(format!("hermes-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("hermes-bench");
        let beside = dir.join("hermes");
        let err = find_hermes(None, &exe).unwrap_err().to_string();
        assert!(err.contains("HERMES_BIN") && err.contains(&*beside.to_string_lossy()));

        std::fs::write(&beside, b"").unwrap();
        assert_eq!(find_hermes(None, &exe).unwrap(), beside);

        let other = dir.join("other-hermes");
        let err = find_hermes(Some(other.clone().into()), &exe)
            .unwrap_err()
            .to_string();
        assert!(err.contains("HERMES_BIN") && err.contains(&*beside.to_string_lossy()));
        std::fs::write(&other, b"").unwrap();
        assert_eq!(
            find_hermes(Some(other.clone().into()), &exe).unwrap(),
            other
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
