//! The clustered servers of a fault run (`--servers cluster`, docs/faults.md, "Clustered servers"):
//! what Hermes meets where it is deployed (docs/deploy.md, "Durability of the dependencies").
//!
//! - a 3-node RabbitMQ cluster (nodes `hermes-<ns>-1..3@localhost`, each with its own ports
//!   and directories, joined with `rabbitmqctl join_cluster`, a private Erlang cookie and no
//!   plugins), behind a round-robin TCP proxy that plays the Kubernetes Service;
//! - PostgreSQL, a primary and a streaming standby (`pg_basebackup -R`), synchronous with
//!   required durability (`synchronous_standby_names = 'ANY 1 (*)'` on both, as
//!   CloudNativePG configures each instance that may become primary), behind a switchable
//!   proxy that plays the `-rw` Service.
//!
//! Everything listens on loopback only, on free ports, under the run's directory, and is
//! killed and removed when the [`Cluster`] is dropped (after a failure or Ctrl-C too). The
//! machine's own servers and its default node `rabbit@<host>` are never addressed: every
//! command names one of the run's nodes, with the run's cookie.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};
use hermes_net::chaos::ChaosProxy;

use super::programs::{
    as_user, initdb, kill9, output, own, postgres_bin, rabbitmq_bin, run, start_postgres,
    wait_until,
};
use crate::fleet_process::free_port;

/// The cluster's folder under the run's directory.
pub(super) const CLUSTER_DIR: &str = "cluster";

/// Broker nodes in the cluster: a quorum queue keeps a majority through one node's loss.
pub(super) const RABBIT_NODES: usize = 3;

/// One broker node: its name, ports and directory.
#[derive(Clone, Debug)]
pub(super) struct RabbitNode {
    pub name: String,
    amqp: u16,
    dist: u16,
    dir: PathBuf,
}

/// One PostgreSQL server: its port and data directory.
#[derive(Clone, Debug)]
struct PgNode {
    port: u16,
    data: PathBuf,
}

/// The programs, ports and directories of the cluster: everything a blocking task needs to
/// stop or start a node. Cloned into those tasks; never stops anything on drop.
#[derive(Clone)]
pub(super) struct Nodes {
    dir: PathBuf,
    rabbit_bin: PathBuf,
    pg_bin: PathBuf,
    pub rabbit: Vec<RabbitNode>,
    pg: [PgNode; 2],
}

/// The running cluster; dropping it kills every server and removes its directory.
pub(super) struct Cluster {
    pub nodes: Nodes,
    /// The Service in front of the broker nodes.
    amqp: ChaosProxy,
    /// The `-rw` Service: the current PostgreSQL primary.
    rw: ChaosProxy,
    /// Which of `nodes.pg` is the primary.
    primary: AtomicUsize,
}

impl Cluster {
    /// Start the cluster under `dir`, nodes named after `id`.
    pub async fn start(dir: &Path, id: &str) -> anyhow::Result<Self> {
        let dir = dir.join(CLUSTER_DIR);
        std::fs::create_dir_all(&dir)?;
        let mut rabbit = Vec::new();
        for n in 1..=RABBIT_NODES {
            rabbit.push(RabbitNode {
                name: format!("hermes-{id}-{n}@localhost"),
                amqp: free_port()?,
                dist: free_port()?,
                dir: dir.join(format!("rabbit-{n}")),
            });
        }
        let pg = [0, 1].map(|n| PgNode {
            port: 0,
            data: dir.join("pg").join(format!("node-{n}")),
        });
        let mut nodes = Nodes {
            rabbit_bin: rabbitmq_bin()?,
            pg_bin: postgres_bin()?,
            dir,
            rabbit,
            pg,
        };
        for n in &mut nodes.pg {
            n.port = free_port()?;
        }
        let loopback = |port: u16| std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let cluster = Self {
            amqp: ChaosProxy::balance(nodes.rabbit.iter().map(|n| loopback(n.amqp)).collect())
                .await,
            rw: ChaosProxy::start(loopback(nodes.pg[0].port)).await,
            primary: AtomicUsize::new(0),
            nodes,
        };
        // Built first, so that a start that fails half-way is cleaned up by the drop.
        let boot = cluster.nodes.clone();
        tokio::task::spawn_blocking(move || boot.boot()).await??;
        Ok(cluster)
    }

    /// The broker as the fleet reaches it: through the Service.
    pub fn amqp_url(&self) -> String {
        format!("amqp://guest:guest@{}/%2f", self.amqp.addr)
    }

    /// PostgreSQL's `postgres` database through the `-rw` Service.
    pub fn postgres_url(&self) -> String {
        format!("postgres://postgres@{}/postgres", self.rw.addr)
    }

    /// Which of the two PostgreSQL servers is the primary (0 or 1).
    pub fn primary(&self) -> usize {
        self.primary.load(Ordering::SeqCst)
    }

    /// Point the `-rw` Service at server `n`, now the primary, cutting what was open.
    pub fn switch_rw(&self, n: usize) {
        let to = std::net::SocketAddr::from(([127, 0, 0, 1], self.nodes.pg[n].port));
        self.rw.switch(vec![to]);
        self.primary.store(n, Ordering::SeqCst);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.nodes.kill_everything();
        self.nodes.keep_logs();
        if let Err(e) = std::fs::remove_dir_all(&self.nodes.dir) {
            eprintln!("faults: could not remove {}: {e}", self.nodes.dir.display());
        }
    }
}

impl Nodes {
    fn cookie_home(&self) -> PathBuf {
        self.dir.join("rabbit-home")
    }

    /// Start the three broker nodes, join them, then the primary and its standby.
    fn boot(&self) -> anyhow::Result<()> {
        let home = self.cookie_home();
        std::fs::create_dir_all(&home)?;
        // Nodes trust each other and the CLI through this cookie only: not the machine's.
        let cookie = format!("{:032X}", rand::random::<u128>());
        let cookie_file = home.join(".erlang.cookie");
        std::fs::write(&cookie_file, cookie)?;
        std::fs::write(home.join("enabled_plugins"), "[].\n")?;
        std::fs::write(home.join("env.conf"), "")?;
        // The manifests' setting (k8s/components/dependencies/rabbitmq.yaml).
        std::fs::write(
            home.join("advanced.config"),
            "[{rabbit, [{quorum_cluster_size, 3}]}].\n",
        )?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cookie_file, std::fs::Permissions::from_mode(0o400))?;
        for node in &self.rabbit {
            std::fs::create_dir_all(node.dir.join("log"))?;
        }
        own(&self.dir, "rabbitmq")?;
        for n in 0..self.rabbit.len() {
            self.spawn_rabbit(n)?;
        }
        for n in 0..self.rabbit.len() {
            self.await_rabbit(n)?;
        }
        let first = self.rabbit[0].name.clone();
        for n in 1..self.rabbit.len() {
            run(self.rabbitmqctl(n, &["stop_app"]))?;
            run(self.rabbitmqctl(n, &["join_cluster", &first]))
                .with_context(|| format!("{} joining {first}", self.rabbit[n].name))?;
            run(self.rabbitmqctl(n, &["start_app"]))?;
        }
        for n in 0..self.rabbit.len() {
            self.await_rabbit(n)?;
        }
        self.init_primary()?;
        self.start_pg(0)?;
        self.clone_standby(1, 0)
    }

    fn rabbit_cmd(&self, n: usize, program: &str, args: &[&str]) -> Command {
        let node = &self.rabbit[n];
        let home = self.cookie_home();
        let d = |p: &str| node.dir.join(p).to_string_lossy().into_owned();
        let h = |p: &str| home.join(p).to_string_lossy().into_owned();
        // `env` sets HOME after runuser has set it to the user's: the run's cookie, not the
        // machine broker's.
        let mut full = vec![format!("HOME={}", home.display())];
        full.push(self.rabbit_bin.join(program).to_string_lossy().into_owned());
        full.extend(args.iter().map(|a| a.to_string()));
        let full: Vec<&str> = full.iter().map(String::as_str).collect();
        let mut cmd = as_user("rabbitmq", PathBuf::from("env"), &full);
        cmd.env("RABBITMQ_NODENAME", &node.name)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", node.amqp.to_string())
            .env("RABBITMQ_DIST_PORT", node.dist.to_string())
            .env("RABBITMQ_MNESIA_BASE", d("mnesia"))
            .env("RABBITMQ_LOG_BASE", d("log"))
            .env("RABBITMQ_PID_FILE", d("pid"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", h("enabled_plugins"))
            .env("RABBITMQ_CONFIG_FILE", h("rabbitmq"))
            .env("RABBITMQ_ADVANCED_CONFIG_FILE", h("advanced.config"))
            .env("RABBITMQ_CONF_ENV_FILE", h("env.conf"))
            .current_dir(&node.dir);
        cmd
    }

    /// `rabbitmqctl` aimed at node `n` (never at the machine's default node).
    pub fn rabbitmqctl(&self, n: usize, args: &[&str]) -> Command {
        let mut full = vec!["-n", self.rabbit[n].name.as_str()];
        full.extend_from_slice(args);
        self.rabbit_cmd(n, "rabbitmqctl", &full)
    }

    fn spawn_rabbit(&self, n: usize) -> anyhow::Result<()> {
        run(self.rabbit_cmd(n, "rabbitmq-server", &["-detached"]))
            .with_context(|| format!("starting {}", self.rabbit[n].name))
    }

    fn await_rabbit(&self, n: usize) -> anyhow::Result<()> {
        // The node registers itself a moment after `-detached` returns.
        wait_until(&format!("{} to boot", self.rabbit[n].name), || {
            run(self.rabbitmqctl(n, &["-q", "await_startup", "--timeout", "60"])).is_ok()
        })
    }

    /// Start broker node `n` again and wait until it serves.
    pub fn start_rabbit(&self, n: usize) -> anyhow::Result<()> {
        self.spawn_rabbit(n)?;
        self.await_rabbit(n)
    }

    /// The broker node's OS process, from its pid file.
    fn rabbit_pid(&self, n: usize) -> Option<i32> {
        std::fs::read_to_string(self.rabbit[n].dir.join("pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// `kill -9` of broker node `n`; returns once its process is gone.
    pub fn kill_rabbit(&self, n: usize) -> anyhow::Result<()> {
        let pid = self
            .rabbit_pid(n)
            .with_context(|| format!("{} has no pid file", self.rabbit[n].name))?;
        kill9(pid);
        std::fs::remove_file(self.rabbit[n].dir.join("pid")).ok();
        wait_until(&format!("{} to die", self.rabbit[n].name), || !alive(pid))
    }

    /// Stop broker node `n` as an operator's rolling upgrade does: once every quorum queue
    /// keeps a majority without it, gracefully.
    pub fn stop_rabbit_gracefully(&self, n: usize) -> anyhow::Result<()> {
        let node = self.rabbit[n].name.as_str();
        run(self.rabbit_cmd(
            n,
            "rabbitmq-upgrade",
            &["-n", node, "await_online_quorum_plus_one", "-t", "120"],
        ))
        .with_context(|| format!("waiting for quorum + 1 before stopping {node}"))?;
        run(self.rabbitmqctl(n, &["shutdown"])).with_context(|| format!("stopping {node}"))
    }

    /// `(queue, leader, members)` of every queue whose name starts with `prefix`, as a
    /// running node reports them.
    pub fn queues(&self, prefix: &str) -> anyhow::Result<Vec<(String, String, usize)>> {
        for n in 0..self.rabbit.len() {
            let Ok(out) = output(self.rabbitmqctl(
                n,
                &[
                    "-q",
                    "--no-table-headers",
                    "list_queues",
                    "name",
                    "leader",
                    "members",
                ],
            )) else {
                continue;
            };
            return Ok(parse_queues(&out, prefix));
        }
        bail!("no broker node answers list_queues")
    }

    fn pg_ctl(&self, n: usize, args: &[&str]) -> Command {
        let data = self.pg[n].data.to_string_lossy().into_owned();
        let mut full = vec!["-D", data.as_str()];
        full.extend_from_slice(args);
        as_user("postgres", self.pg_bin.join("pg_ctl"), &full)
    }

    fn init_primary(&self) -> anyhow::Result<()> {
        let data = &self.pg[0].data;
        initdb(&self.pg_bin, &self.dir.join("pg"), data)
            .context("initdb of the cluster's primary")?;
        // Every instance requires one synchronous standby when it is primary, as the
        // manifests' `dataDurability: required` makes CloudNativePG configure it; the standby
        // inherits this file through pg_basebackup.
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf)?;
        text.push_str(
            "\nlisten_addresses = '127.0.0.1'\nmax_connections = 200\n\
             synchronous_standby_names = 'ANY 1 (*)'\nsynchronous_commit = on\n",
        );
        std::fs::write(&conf, text)?;
        Ok(())
    }

    /// Start PostgreSQL server `n` on its port and wait until it accepts connections.
    fn start_pg(&self, n: usize) -> anyhow::Result<()> {
        let node = &self.pg[n];
        let log = node.data.join("server.log");
        // The socket and its lock file live beside the data, not in it: `pg_basebackup` copies
        // a lock file with the data, and a standby cloned from a server that was itself
        // cloned from this one then finds its own port's lock, naming a postmaster that may
        // still be a zombie (seen: "lock file .s.PGSQL.<port>.lock already exists").
        let sockets = node.data.with_extension("sockets");
        std::fs::create_dir_all(&sockets)?;
        own(&sockets, "postgres")?;
        let opts = format!("-p {} -k {}", node.port, sockets.display());
        start_postgres(&self.pg_bin, &node.data, &log, &opts)
            .with_context(|| format!("starting PostgreSQL server {n}"))
    }

    /// Make server `n` a fresh standby of server `primary` (`pg_basebackup -R`), start it,
    /// and wait until the primary counts it as a synchronous standby.
    pub fn clone_standby(&self, n: usize, primary: usize) -> anyhow::Result<()> {
        let data = &self.pg[n].data;
        let _ = std::fs::remove_dir_all(data);
        run(as_user(
            "postgres",
            self.pg_bin.join("pg_basebackup"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &self.pg[primary].port.to_string(),
                "-U",
                "postgres",
                "-D",
                &data.to_string_lossy(),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                "--no-sync",
            ],
        ))
        .with_context(|| format!("pg_basebackup of server {n} from server {primary}"))?;
        self.start_pg(n)?;
        let port = self.pg[primary].port.to_string();
        wait_until("the standby to stream synchronously", || {
            output(as_user(
                "postgres",
                self.pg_bin.join("psql"),
                &[
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-U",
                    "postgres",
                    "-Atc",
                    "SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')",
                ],
            ))
            .is_ok_and(|o| o.trim() != "0")
        })
    }

    /// Stop server `n` hard (`pg_ctl stop -m immediate`: no checkpoint, as a node lost).
    pub fn crash_pg(&self, n: usize) -> anyhow::Result<()> {
        run(self.pg_ctl(n, &["-m", "immediate", "-w", "stop"]))
            .with_context(|| format!("stopping PostgreSQL server {n}"))
    }

    /// Promote standby `n` and wait until it accepts writes.
    pub fn promote(&self, n: usize) -> anyhow::Result<()> {
        run(self.pg_ctl(n, &["-w", "-t", "60", "promote"]))
            .with_context(|| format!("promoting PostgreSQL server {n}"))
    }

    /// Copy the servers' logs beside the fleet's (the run's directory), which outlive the
    /// cluster's own directory.
    fn keep_logs(&self) {
        let Some(run_dir) = self.dir.parent() else {
            return;
        };
        for node in &self.rabbit {
            let log = node.dir.join("log").join(format!("{}.log", node.name));
            let _ = std::fs::copy(&log, run_dir.join(format!("{}.log", node.name)));
        }
        for (n, pg) in self.pg.iter().enumerate() {
            let _ = std::fs::copy(
                pg.data.join("server.log"),
                run_dir.join(format!("postgres-{n}.log")),
            );
        }
    }

    /// Kill every server of the cluster, whatever state it is in.
    fn kill_everything(&self) {
        for n in 0..self.rabbit.len() {
            if let Some(pid) = self.rabbit_pid(n) {
                kill9(pid);
            }
        }
        for n in 0..self.pg.len() {
            let _ = run(self.pg_ctl(n, &["-m", "immediate", "-w", "stop"]));
        }
    }
}

/// `name leader members` lines of `rabbitmqctl list_queues`, kept where the name starts
/// with `prefix`: the queue, its leader and how many members it has.
fn parse_queues(out: &str, prefix: &str) -> Vec<(String, String, usize)> {
    out.lines()
        .filter_map(|line| {
            let mut cols = line.split('\t');
            let name = cols.next()?.trim();
            let leader = cols.next()?.trim();
            let members = cols.next()?.trim();
            name.starts_with(prefix).then(|| {
                let count = members
                    .trim_matches(|c| c == '[' || c == ']')
                    .split(',')
                    .filter(|m| !m.trim().is_empty())
                    .count();
                (name.to_string(), leader.to_string(), count)
            })
        })
        .collect()
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_queues_lines_give_leader_and_member_count() {
        let out = "ns1.router\thermes-a-2@localhost\t[hermes-a-1@localhost, hermes-a-2@localhost, hermes-a-3@localhost]\n\
                   other.router\thermes-a-1@localhost\t[hermes-a-1@localhost]\n\
                   ns1.router.dead\thermes-a-1@localhost\t[hermes-a-1@localhost, hermes-a-3@localhost]\n";
        assert_eq!(
            parse_queues(out, "ns1."),
            vec![
                ("ns1.router".into(), "hermes-a-2@localhost".into(), 3),
                ("ns1.router.dead".into(), "hermes-a-1@localhost".into(), 2),
            ]
        );
    }
}
