//! The faults of a clustered run (`--servers cluster`, docs/faults.md, "Clustered servers"):
//! the broker node leading the stages' queues killed, a follower killed, the broker nodes
//! restarted one at a time, PostgreSQL failed over to its standby, and a promoted primary
//! left without a standby. Each returns what it did and when the fault began: recovery is
//! timed from the fault itself, since the cluster is meant to keep serving through it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::Fault;
use super::cluster::{Cluster, RABBIT_NODES};
use super::steps::{step, tell};
use crate::fleet_process::Fleet;

/// Run the blocking `job` while the fleet's exited processes are restarted as usual.
async fn reviving<T: Send + 'static>(
    fleet: &mut Fleet,
    revived: &mut Vec<String>,
    job: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let mut handle = tokio::task::spawn_blocking(job);
    let mut poll = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            r = &mut handle => return r?,
            _ = poll.tick() => revived.extend(fleet.revive()),
        }
    }
}

/// Wait `d`, restarting exited processes meanwhile.
async fn pause(fleet: &mut Fleet, revived: &mut Vec<String>, d: Duration) {
    let until = tokio::time::Instant::now() + d;
    let mut poll = tokio::time::interval(Duration::from_millis(100));
    while tokio::time::Instant::now() < until {
        poll.tick().await;
        revived.extend(fleet.revive());
    }
}

/// Print the load's progress (taken, answered) every 2 s, until aborted.
pub(super) async fn progress(seen: std::sync::Arc<super::load::Seen>) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        tell(&format!(
            "taken {}, answered {}",
            seen.taken(),
            seen.answered()
        ));
    }
}

/// Is `queue` one of the work queues of namespace `ns` (`{ns}.router`, not `{ns}.router.dead`)?
fn is_stage_queue(queue: &str, ns: &str) -> bool {
    queue
        .strip_prefix(ns)
        .and_then(|rest| rest.strip_prefix('.'))
        .is_some_and(|stage| !stage.contains('.'))
}

/// How many of the run's stage queues each broker node leads (every node listed).
async fn leaders(
    cluster: &Cluster,
    ns: &str,
    fleet: &mut Fleet,
    revived: &mut Vec<String>,
) -> anyhow::Result<BTreeMap<usize, usize>> {
    let nodes = cluster.nodes.clone();
    let prefix = format!("{ns}.");
    let queues = reviving(fleet, revived, move || nodes.queues(&prefix)).await?;
    let mut led: BTreeMap<usize, usize> = (0..RABBIT_NODES).map(|n| (n, 0)).collect();
    for (queue, leader, _) in queues {
        if !is_stage_queue(&queue, ns) {
            continue;
        }
        if let Some(n) = cluster.nodes.rabbit.iter().position(|r| r.name == leader) {
            *led.entry(n).or_default() += 1;
        }
    }
    Ok(led)
}

/// Every stage queue of `ns` has a member on each broker node (the manifests' promise:
/// docs/deploy.md, "Durability of the dependencies"); returns a line saying so.
pub(super) async fn check_members(cluster: &Cluster, ns: &str) -> anyhow::Result<String> {
    let nodes = cluster.nodes.clone();
    let prefix = format!("{ns}.");
    let queues = tokio::task::spawn_blocking(move || nodes.queues(&prefix)).await??;
    let short: Vec<String> = queues
        .iter()
        .filter(|(_, _, members)| *members < RABBIT_NODES)
        .map(|(q, _, m)| format!("{q} ({m})"))
        .collect();
    if queues.is_empty() || !short.is_empty() {
        anyhow::bail!(
            "quorum queues without a member on each of the {RABBIT_NODES} nodes: {short:?} (of {} queues)",
            queues.len()
        );
    }
    Ok(format!(
        "all {} quorum queues have {RABBIT_NODES} members",
        queues.len()
    ))
}

/// What `/readyz` of each process answers (status codes, in process order).
async fn readiness(fleet: &Fleet) -> String {
    let http = reqwest::Client::new();
    let mut codes = Vec::new();
    for p in &fleet.procs {
        let code = http
            .get(format!("http://127.0.0.1:{}/readyz", p.admin))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .map(|r| r.status().as_u16().to_string())
            .unwrap_or_else(|_| "-".into());
        codes.push(format!("{} {code}", p.service));
    }
    codes.join(", ")
}

/// What `hermes doctor` says of the database's durability (its `durability` line), run
/// with the fleet's settings: during a stall, it must name the missing standby.
async fn doctor(fleet: &Fleet) -> String {
    let run = fleet.command(&["doctor"]).output();
    match tokio::time::timeout(Duration::from_secs(30), run).await {
        Ok(Ok(out)) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.contains("durability"))
            .map(|l| l.trim().to_string())
            .unwrap_or_else(|| "no durability line".into()),
        Ok(Err(e)) => format!("cannot run: {e}"),
        Err(_) => "no answer within 30 s".into(),
    }
}

/// Inject `fault` into the cluster; `down` is how long a killed node or a missing standby
/// stays away. `moment` is told the instant the fault strikes (recovery is timed from it).
/// Returns what was done.
pub(super) async fn inject(
    fault: Fault,
    cluster: &Cluster,
    ns: &str,
    down: Duration,
    fleet: &mut Fleet,
    revived: &mut Vec<String>,
    moment: tokio::sync::oneshot::Sender<Instant>,
) -> anyhow::Result<String> {
    match fault {
        Fault::RabbitLeader | Fault::RabbitFollower => {
            let led = leaders(cluster, ns, fleet, revived).await?;
            let pick = if fault == Fault::RabbitLeader {
                led.iter().max_by_key(|(_, k)| **k)
            } else {
                led.iter().min_by_key(|(_, k)| **k)
            };
            let (&n, &k) = pick.expect("the cluster has nodes");
            let name = cluster.nodes.rabbit[n].name.clone();
            let nodes = cluster.nodes.clone();
            let _ = moment.send(Instant::now());
            step(&format!("kill -9 of {name}"));
            reviving(fleet, revived, move || nodes.kill_rabbit(n)).await?;
            step(&format!("{name} is gone"));
            pause(fleet, revived, down).await;
            let nodes = cluster.nodes.clone();
            step(&format!("starting {name} again"));
            reviving(fleet, revived, move || nodes.start_rabbit(n)).await?;
            step(&format!("{name} is back"));
            let total: usize = led.values().sum();
            Ok(format!(
                "kill -9 of broker node {name} (leader of {k} of {total} stage queues), restarted after {} s",
                down.as_secs()
            ))
        }
        Fault::RollingCluster => {
            let at = Instant::now();
            let _ = moment.send(at);
            for n in 0..RABBIT_NODES {
                step(&format!("restarting {}", cluster.nodes.rabbit[n].name));
                let nodes = cluster.nodes.clone();
                reviving(fleet, revived, move || {
                    nodes.stop_rabbit_gracefully(n)?;
                    nodes.start_rabbit(n)
                })
                .await?;
            }
            Ok(format!(
                "rolling restart of the {RABBIT_NODES} broker nodes ({:.1} s)",
                at.elapsed().as_secs_f64()
            ))
        }
        Fault::PgFailover | Fault::PgNoStandby => {
            let old = cluster.primary();
            let new = 1 - old;
            let nodes = cluster.nodes.clone();
            let at = Instant::now();
            let _ = moment.send(at);
            step(&format!(
                "stopping PostgreSQL server {old} hard, promoting {new}"
            ));
            reviving(fleet, revived, move || {
                nodes.crash_pg(old)?;
                nodes.promote(new)
            })
            .await?;
            cluster.switch_rw(new);
            step(&format!("the address points at server {new}"));
            let switched = at.elapsed();
            let mut stalled = String::new();
            if fault == Fault::PgNoStandby {
                // The promoted primary requires a synchronous standby and has none: every
                // commit waits. What does the fleet say meanwhile?
                // Read late in the stall: readiness turns red once a commit has waited
                // hermes_db::COMMIT_WAIT_NOT_READY, and is probed every 2 s.
                let early = down * 3 / 4;
                pause(fleet, revived, early).await;
                stalled = format!(
                    "; /readyz while commits wait: {}; doctor: {}",
                    readiness(fleet).await,
                    doctor(fleet).await
                );
                pause(fleet, revived, down - early).await;
            }
            let nodes = cluster.nodes.clone();
            step(&format!("cloning server {old} as a standby of {new}"));
            reviving(fleet, revived, move || nodes.clone_standby(old, new)).await?;
            step("the standby streams");
            Ok(format!(
                "PostgreSQL primary stopped hard, standby promoted and the address switched in {:.2} s, a new standby streaming {:.1} s after the stop{stalled}",
                switched.as_secs_f64(),
                at.elapsed().as_secs_f64()
            ))
        }
        _ => anyhow::bail!("{fault:?} is not a fault of the clustered servers"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_work_queues_are_stage_queues() {
        assert!(is_stage_queue("faults1.router", "faults1"));
        assert!(!is_stage_queue("faults1.router.dead", "faults1"));
        assert!(!is_stage_queue("faults1.delivery.retry.1s", "faults1"));
        assert!(!is_stage_queue("faults10.router", "faults1"));
    }
}
