//! The three servers of a fault run and how one is taken away (docs/faults.md).
//!
//! Three ways, chosen with `--servers`:
//! - `proxy`: the machine's own servers behind chaos proxies this command runs. "Away" cuts
//!   and refuses the fleet's connections; a Redis "restart" deletes the run's keys. Nothing
//!   that other work on the machine shares is ever stopped.
//! - `private`: servers of the run's own, started from the installed PostgreSQL, Redis and
//!   RabbitMQ binaries on free loopback ports, in a directory of the run, and really stopped
//!   (`pg_ctl stop -m fast`, `SHUTDOWN NOSAVE`, `rabbitmqctl shutdown`) and started again:
//!   the fleet sees what a restart does (PostgreSQL's "terminating connection due to
//!   administrator command", a broker closing every channel, a Redis that comes back empty).
//!   They are stopped and their directory removed when the run ends, also when it fails.
//! - `cluster`: a 3-node RabbitMQ cluster and a PostgreSQL primary with a synchronous
//!   standby of the run's own, each behind the proxy that plays its Kubernetes Service
//!   ([`super::cluster`]), and the machine's Redis (namespaced). Its faults kill nodes
//!   (`rabbit-leader`, `pg-failover`, …), not whole servers.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use clap::ValueEnum;
use hermes_net::chaos::ChaosProxy;

use super::cluster::Cluster;
use super::programs::{
    as_user, initdb, output, own, postgres_bin, rabbitmq_bin, run, start_postgres, wait_until,
    which,
};
use crate::fleet_process::free_port;

/// The folders under a run's directory that hold servers' data: the private servers', the
/// cluster's. Removed when the run ends (by their drops, or by the reaper).
pub(super) const DIRS: [&str; 2] = [PRIVATE_DIR, super::cluster::CLUSTER_DIR];
const PRIVATE_DIR: &str = "servers";

/// Where the run's servers come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ServerMode {
    /// The machine's servers behind chaos proxies: taken away by cutting connections.
    Proxy,
    /// Servers of the run's own, really stopped and started again.
    Private,
    /// A 3-node broker cluster and a PostgreSQL primary with a synchronous standby, of the
    /// run's own, behind Service-like proxies: nodes are killed, failed over, rolled.
    Cluster,
}

/// One of the three servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    Postgres,
    Redis,
    Rabbitmq,
}

/// The URLs of the three servers, as the harness itself reaches them.
pub struct Urls {
    /// The server's `postgres` database (scratch databases are made from it).
    pub postgres: String,
    pub redis: String,
    pub amqp: String,
}

/// The run's servers.
pub struct Servers {
    pub urls: Urls,
    how: How,
}

enum How {
    Proxied {
        postgres: ChaosProxy,
        redis: ChaosProxy,
        rabbitmq: ChaosProxy,
    },
    Private(Private),
    Cluster(Cluster),
}

impl Servers {
    /// Set up the servers: proxies in front of `machine`'s, or private ones under `dir`.
    pub async fn start(mode: ServerMode, machine: Urls, dir: &Path) -> anyhow::Result<Self> {
        match mode {
            ServerMode::Proxy => {
                let postgres = proxy_for(&machine.postgres, 5432).await?;
                let redis = proxy_for(&machine.redis, 6379).await?;
                let rabbitmq = proxy_for(&machine.amqp, 5672).await?;
                Ok(Self {
                    urls: machine,
                    how: How::Proxied {
                        postgres,
                        redis,
                        rabbitmq,
                    },
                })
            }
            ServerMode::Private => {
                let private = Private::start(dir)?;
                Ok(Self {
                    urls: private.urls(),
                    how: How::Private(private),
                })
            }
            ServerMode::Cluster => {
                let cluster = Cluster::start(dir, &run_id(dir)).await?;
                Ok(Self {
                    urls: Urls {
                        postgres: cluster.postgres_url(),
                        redis: machine.redis,
                        amqp: cluster.amqp_url(),
                    },
                    how: How::Cluster(cluster),
                })
            }
        }
    }

    /// The clustered servers, when the run has them.
    pub fn cluster(&self) -> Option<&Cluster> {
        match &self.how {
            How::Cluster(c) => Some(c),
            _ => None,
        }
    }

    /// `url` (one of the servers') as the fleet must use it: through its proxy, if any.
    pub fn for_fleet(&self, server: Server, url: &str) -> anyhow::Result<String> {
        let How::Proxied {
            postgres,
            redis,
            rabbitmq,
        } = &self.how
        else {
            return Ok(url.to_string());
        };
        let proxy = match server {
            Server::Postgres => postgres,
            Server::Redis => redis,
            Server::Rabbitmq => rabbitmq,
        };
        let mut u = url::Url::parse(url).context("a server URL")?;
        u.set_ip_host(proxy.addr.ip())
            .map_err(|()| anyhow::anyhow!("cannot point {url} at the proxy"))?;
        u.set_port(Some(proxy.addr.port()))
            .map_err(|()| anyhow::anyhow!("cannot point {url} at the proxy"))?;
        Ok(u.to_string())
    }

    /// Take `server` away from the fleet.
    pub async fn take_away(&self, server: Server) -> anyhow::Result<()> {
        match &self.how {
            How::Cluster(_) => bail!("{}", CLUSTER_FAULTS),
            How::Proxied { .. } => self.proxy(server).set_down(true),
            How::Private(p) => {
                let p = p.handle();
                tokio::task::spawn_blocking(move || p.stop(server)).await??;
            }
        }
        Ok(())
    }

    /// Give `server` back. A proxied Redis comes back without the keys of namespace `ns`, as
    /// a restarted Redis without persistence does (a private one really is restarted).
    pub async fn give_back(&self, server: Server, ns: &str) -> anyhow::Result<()> {
        match &self.how {
            How::Cluster(_) => bail!("{}", CLUSTER_FAULTS),
            How::Proxied { .. } => {
                if server == Server::Redis {
                    forget_namespace(&self.urls.redis, ns).await?;
                }
                self.proxy(server).set_down(false);
            }
            How::Private(p) => {
                let p = p.handle();
                tokio::task::spawn_blocking(move || p.start_one(server)).await??;
            }
        }
        Ok(())
    }

    fn proxy(&self, server: Server) -> &ChaosProxy {
        match (&self.how, server) {
            (How::Proxied { postgres, .. }, Server::Postgres) => postgres,
            (How::Proxied { redis, .. }, Server::Redis) => redis,
            (How::Proxied { rabbitmq, .. }, Server::Rabbitmq) => rabbitmq,
            (How::Private(_) | How::Cluster(_), _) => {
                unreachable!("only proxied servers are taken away by their proxy")
            }
        }
    }
}

/// Why a whole server cannot be taken away from a cluster run.
pub const CLUSTER_FAULTS: &str = "--servers cluster takes its nodes away (rabbit-leader, rabbit-follower, rolling-cluster, pg-failover, pg-no-standby), not whole servers";

/// A short name of the run, from its directory (`/tmp/hermes-faults…`), for node names.
fn run_id(dir: &Path) -> String {
    dir.file_name()
        .map(|n| {
            n.to_string_lossy()
                .replace(|c: char| !c.is_ascii_alphanumeric(), "")
        })
        .unwrap_or_else(|| "faults".into())
}

/// A chaos proxy in front of the server of `url`.
async fn proxy_for(url: &str, default_port: u16) -> anyhow::Result<ChaosProxy> {
    let u = url::Url::parse(url).context("a server URL")?;
    let target = format!(
        "{}:{}",
        u.host_str().unwrap_or("127.0.0.1"),
        u.port().unwrap_or(default_port)
    );
    let addr = tokio::net::lookup_host(&target)
        .await?
        .next()
        .with_context(|| format!("cannot resolve {target}"))?;
    Ok(ChaosProxy::start(addr).await)
}

/// A Redis that restarts without persistence has forgotten everything: delete every key of
/// the run's namespace (and only those; the machine's server is shared).
async fn forget_namespace(redis_url: &str, ns: &str) -> anyhow::Result<()> {
    let client = hermes_cache::client(redis_url)?;
    let mut c = client.get_multiplexed_async_connection().await?;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{ns}:*"))
        .query_async(&mut c)
        .await?;
    for chunk in keys.chunks(500) {
        let _: () = redis::cmd("DEL").arg(chunk).query_async(&mut c).await?;
    }
    Ok(())
}

/// The run's own servers: ports, directories, and the commands that stop and start them.
/// Cloned into blocking tasks; the original stops everything when dropped.
#[derive(Clone)]
struct Private {
    dir: PathBuf,
    pg_bin: PathBuf,
    pg_port: u16,
    redis_port: u16,
    amqp_port: u16,
    dist_port: u16,
    rabbit_bin: PathBuf,
    node: String,
    /// Whether this clone owns the servers (stops them on drop).
    owner: bool,
}

impl Private {
    fn start(dir: &Path) -> anyhow::Result<Self> {
        let dir = dir.join(PRIVATE_DIR);
        std::fs::create_dir_all(&dir)?;
        let pg_bin = postgres_bin()?;
        let rabbit_bin = rabbitmq_bin()?;
        for tool in ["redis-server", "redis-cli"] {
            which(tool).with_context(|| {
                format!("--servers private needs {tool} (apt-get install redis-server)")
            })?;
        }
        let id = dir.parent().map(run_id).unwrap_or_else(|| "faults".into());
        let p = Self {
            pg_bin,
            pg_port: free_port()?,
            redis_port: free_port()?,
            amqp_port: free_port()?,
            dist_port: free_port()?,
            rabbit_bin,
            node: format!("{id}@localhost"),
            dir,
            owner: true,
        };
        p.init_postgres()?;
        p.init_rabbitmq()?;
        for server in [Server::Postgres, Server::Redis, Server::Rabbitmq] {
            p.start_one(server)?;
        }
        Ok(p)
    }

    fn urls(&self) -> Urls {
        Urls {
            postgres: format!("postgres://postgres@127.0.0.1:{}/postgres", self.pg_port),
            redis: format!("redis://127.0.0.1:{}", self.redis_port),
            amqp: format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.amqp_port),
        }
    }

    /// A handle for a blocking task: the same servers, not stopped when it is dropped.
    fn handle(&self) -> Self {
        let mut handle = self.clone();
        handle.owner = false;
        handle
    }

    fn pg_data(&self) -> PathBuf {
        self.dir.join("pg")
    }

    fn rabbit_dir(&self) -> PathBuf {
        self.dir.join("rabbitmq")
    }

    fn init_postgres(&self) -> anyhow::Result<()> {
        let data = self.pg_data();
        initdb(&self.pg_bin, &self.dir.join("pg"), &data)
            .context("initdb of the private PostgreSQL")
    }

    fn init_rabbitmq(&self) -> anyhow::Result<()> {
        let dir = self.rabbit_dir();
        std::fs::create_dir_all(dir.join("log"))?;
        // No plugins (the management plugin would want the machine's port 15672), no
        // configuration or env file of the machine's broker.
        std::fs::write(dir.join("enabled_plugins"), "[].\n")?;
        std::fs::write(dir.join("env.conf"), "")?;
        own(&dir, "rabbitmq")
    }

    fn rabbit_env(&self, cmd: &mut Command) {
        let dir = self.rabbit_dir();
        let d = |p: &str| dir.join(p).to_string_lossy().into_owned();
        cmd.env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", self.amqp_port.to_string())
            .env("RABBITMQ_DIST_PORT", self.dist_port.to_string())
            .env("RABBITMQ_MNESIA_BASE", d("mnesia"))
            .env("RABBITMQ_LOG_BASE", d("log"))
            .env("RABBITMQ_PID_FILE", d("pid"))
            .env("RABBITMQ_ENABLED_PLUGINS_FILE", d("enabled_plugins"))
            .env("RABBITMQ_CONFIG_FILE", d("rabbitmq"))
            .env("RABBITMQ_CONF_ENV_FILE", d("env.conf"))
            .current_dir(&dir);
    }

    fn rabbitmqctl(&self, args: &[&str]) -> Command {
        let mut full = vec!["-n", self.node.as_str()];
        full.extend_from_slice(args);
        let mut cmd = as_user("rabbitmq", self.rabbit_bin.join("rabbitmqctl"), &full);
        self.rabbit_env(&mut cmd);
        cmd
    }

    /// Start one server and wait until it serves.
    fn start_one(&self, server: Server) -> anyhow::Result<()> {
        match server {
            Server::Postgres => {
                let data = self.pg_data();
                let log = data.join("server.log");
                let opts = format!(
                    "-p {} -c listen_addresses=127.0.0.1 -k {} -c max_connections=200",
                    self.pg_port,
                    data.display()
                );
                start_postgres(&self.pg_bin, &data, &log, &opts)
                    .context("starting the private PostgreSQL")
            }
            Server::Redis => {
                let d = |p: &str| self.dir.join(p).to_string_lossy().into_owned();
                let mut cmd = Command::new("redis-server");
                cmd.args(["--port", &self.redis_port.to_string()])
                    .args(["--bind", "127.0.0.1"])
                    .args(["--save", ""])
                    .args(["--appendonly", "no"])
                    .args(["--daemonize", "yes"])
                    .args(["--pidfile", &d("redis.pid")])
                    .args(["--logfile", &d("redis.log")])
                    .args(["--dir", &d("")]);
                run(cmd).context("starting the private Redis")?;
                wait_until("the private Redis to answer", || {
                    let mut ping = Command::new("redis-cli");
                    ping.args(["-p", &self.redis_port.to_string(), "ping"]);
                    output(ping).is_ok_and(|o| o.contains("PONG"))
                })
            }
            Server::Rabbitmq => {
                let mut cmd = as_user(
                    "rabbitmq",
                    self.rabbit_bin.join("rabbitmq-server"),
                    &["-detached"],
                );
                self.rabbit_env(&mut cmd);
                run(cmd).context("starting the private RabbitMQ")?;
                // The node registers itself a moment after `-detached` returns.
                wait_until("the private RabbitMQ to boot", || {
                    run(self.rabbitmqctl(&["-q", "await_startup", "--timeout", "60"])).is_ok()
                })
            }
        }
    }

    /// Stop one server and wait until it has stopped.
    fn stop(&self, server: Server) -> anyhow::Result<()> {
        match server {
            Server::Postgres => run(as_user(
                "postgres",
                self.pg_bin.join("pg_ctl"),
                &[
                    "-D",
                    &self.pg_data().to_string_lossy(),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                ],
            ))
            .context("stopping the private PostgreSQL"),
            Server::Redis => {
                let mut cmd = Command::new("redis-cli");
                cmd.args(["-p", &self.redis_port.to_string(), "shutdown", "nosave"]);
                // redis-cli reports the closed connection of a successful shutdown as an error.
                let _ = output(cmd);
                wait_until("the private Redis to stop", || {
                    std::net::TcpStream::connect(("127.0.0.1", self.redis_port)).is_err()
                })
            }
            Server::Rabbitmq => {
                run(self.rabbitmqctl(&["shutdown"])).context("stopping the private RabbitMQ")
            }
        }
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        if !self.owner {
            return;
        }
        for server in [Server::Rabbitmq, Server::Redis, Server::Postgres] {
            // Already stopped (a fault in progress when the run failed) is fine.
            let _ = self.stop(server);
        }
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            eprintln!("faults: could not remove {}: {e}", self.dir.display());
        }
    }
}
