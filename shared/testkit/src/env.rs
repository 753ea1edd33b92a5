//! [`TestEnv`]: one test's namespace and database on the shared servers, removed on drop,
//! and the fleets started on it ([`TestEnv::start`]).

use std::collections::HashMap;

use hermes::{Listeners, Service};
use hermes_bus::{Bus, Names};
use hermes_config::{Config, Namespace};
use hermes_db::Db;
use hermes_telemetry::Metrics;
use secrecy::SecretString;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use hermes_db::scratch::pool::{self, Pristine, Released};

use crate::db::url_with_db;
use crate::tls::{Protocol, TestCa, TlsTerminator};
use crate::{App, Fleet, KEY, chaos};

/// The API key the OpenAI-compatible fake of [`TestEnv::openai_mock`] is called with.
pub const OPENAI_KEY: &str = "sk-test-provider";

/// A server a test can put behind a [`chaos::ChaosProxy`] ([`TestEnv::behind_proxy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Postgres,
    Redis,
    Broker,
}

impl Server {
    fn var(self) -> &'static str {
        match self {
            Server::Postgres => "DATABASE_URL",
            Server::Redis => "REDIS_URL",
            Server::Broker => "AMQP_URL",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Server::Postgres => 5432,
            Server::Redis => 6379,
            Server::Broker => 5672,
        }
    }
}

/// `url` pointed at `addr`.
fn at(mut url: url::Url, addr: std::net::SocketAddr) -> url::Url {
    url.set_ip_host(addr.ip()).expect("URL takes an IP host");
    url.set_port(Some(addr.port())).expect("URL takes a port");
    url
}

/// One test's private corner of the shared servers.
pub struct TestEnv {
    pub ns: String,
    pub db_name: String,
    pub vars: HashMap<String, String>,
    /// The broker itself, also when the test reaches it through a proxy: cleanup must not
    /// depend on the proxy.
    broker: String,
    /// What the database held when it was handed out, to wipe it back to for the next test.
    pristine: Option<Pristine>,
}

/// The server test databases are made on (`DATABASE_URL`'s, else the local default).
fn db_server() -> pool::Server {
    pool::Server::new(&SecretString::from(hermes_testkit_core::pg_base()))
        .expect("DATABASE_URL is valid")
}

impl TestEnv {
    /// A fresh namespace and database; variables default to an in-process mock fleet.
    pub async fn new() -> Self {
        hermes_net::install_crypto_provider();
        let id = &uuid::Uuid::now_v7().simple().to_string()[20..];
        let ns = format!("t{id}");
        let db_name = format!("hermes_t{id}");
        let pristine = db_server()
            .claim(&db_name)
            .await
            .unwrap_or_else(|e| panic!("cannot create test database: {e}"));
        let mut vars = HashMap::new();
        vars.insert("DATABASE_URL".into(), url_with_db(&db_name));
        let broker = hermes_testkit_core::amqp_url();
        vars.insert("AMQP_URL".into(), broker.clone());
        vars.insert("REDIS_URL".into(), hermes_testkit_core::redis_url());
        vars.insert("HERMES_NAMESPACE".into(), ns.clone());
        vars.insert("HERMES_PROVIDER".into(), "mock".into());
        vars.insert("API_SERVER_KEY".into(), KEY.into());
        vars.insert("HERMES_LOG_FORMAT".into(), "text".into());
        // A backstop for a process killed before its cleanup runs on drop: every quorum queue
        // holds open files on the broker, so leftovers must not pile up.
        vars.insert("HERMES_QUEUE_EXPIRES_SECS".into(), "120".into());
        vars.insert("HERMES_SHUTDOWN_GRACE_SECS".into(), "15".into());
        vars.insert("HERMES_RUN_TIMEOUT_SECS".into(), "30".into());
        vars.insert("HERMES_HTTP_ADDR".into(), "127.0.0.1:0".into());
        vars.insert("HERMES_ADMIN_ADDR".into(), "127.0.0.1:0".into());
        Self {
            ns,
            db_name,
            vars,
            broker,
            pristine: Some(pristine),
        }
    }

    pub fn set(&mut self, name: &str, value: &str) -> &mut Self {
        self.vars.insert(name.into(), value.into());
        self
    }

    /// Leave `name` unset (as `API_SERVER_KEY`, which is set by default).
    pub fn unset(&mut self, name: &str) -> &mut Self {
        self.vars.remove(name);
        self
    }

    /// Call models through the OpenAI-compatible fake at `base_url` (a wiremock server's
    /// address, with `/v1` when its mocks match that prefix), with [`OPENAI_KEY`].
    pub fn openai_mock(&mut self, base_url: &str) -> &mut Self {
        self.set("HERMES_PROVIDER", "openai")
            .set("OPENAI_API_KEY", OPENAI_KEY)
            .set("OPENAI_BASE_URL", base_url)
    }

    /// This test's configuration, as the services would read it from the environment.
    pub fn config(&self) -> Config {
        let vars = self.vars.clone();
        Config::from_lookup(&move |k| vars.get(k).cloned(), None)
            .expect("test configuration is valid")
    }

    /// Route this test's broker connections through a [`chaos::ChaosProxy`].
    pub async fn broker_behind_proxy(&mut self) -> chaos::ChaosProxy {
        self.behind_proxy(Server::Broker).await
    }

    /// Route this test's connections to `server` through a [`chaos::ChaosProxy`], so the test
    /// can take it away from the fleet without touching the server other tests share. The
    /// test's own handles made before this call ([`TestEnv::db`] after it goes through the
    /// proxy too; [`TestEnv::direct_db`] never does).
    pub async fn behind_proxy(&mut self, server: Server) -> chaos::ChaosProxy {
        let (url, target) = self.server_url(server).await;
        let proxy = chaos::ChaosProxy::start(target).await;
        let url = at(url, proxy.addr);
        self.set(server.var(), url.as_str());
        proxy
    }

    /// This test's URL of `server` and the address it resolves to.
    async fn server_url(&self, server: Server) -> (url::Url, std::net::SocketAddr) {
        let url = url::Url::parse(&self.vars[server.var()]).expect("server URL is a URL");
        let target = format!(
            "{}:{}",
            url.host_str().unwrap_or("127.0.0.1"),
            url.port().unwrap_or(server.default_port())
        );
        let target = tokio::net::lookup_host(target)
            .await
            .unwrap()
            .next()
            .expect("server address");
        (url, target)
    }

    /// The URL of `server` (PostgreSQL or Redis) through a TLS terminator whose certificate,
    /// signed by `ca`, names `names`; the URL asks for full verification against `ca`
    /// (`sslmode=verify-full` or `rediss://`, with `sslrootcert`). The variable is unchanged:
    /// [`TestEnv::set`] it to put the fleet behind TLS.
    pub async fn tls_url(
        &self,
        server: Server,
        ca: &TestCa,
        names: &[&str],
    ) -> (String, TlsTerminator) {
        let (url, target) = self.server_url(server).await;
        let protocol = match server {
            Server::Postgres => Protocol::Postgres,
            Server::Redis => Protocol::Redis,
            Server::Broker => panic!("the broker is not put behind TLS by tests"),
        };
        let terminator = TlsTerminator::start(protocol, target, ca, names).await;
        let mut url = at(url, terminator.addr);
        let root = ca.path().display().to_string();
        match server {
            Server::Postgres => {
                url.query_pairs_mut()
                    .append_pair("sslmode", "verify-full")
                    .append_pair("sslrootcert", &root);
            }
            _ => {
                url.set_scheme("rediss").expect("rediss is a scheme");
                url.query_pairs_mut().append_pair("sslrootcert", &root);
            }
        }
        (url.to_string(), terminator)
    }

    /// A pool on this test's database that never goes through a proxy (to read the truth
    /// while the fleet's way to PostgreSQL is cut).
    pub fn direct_db(&self) -> Db {
        Db::new(&SecretString::from(url_with_db(&self.db_name)), 4).unwrap()
    }

    /// A pool on this test's database.
    pub fn db(&self) -> Db {
        Db::new(&SecretString::from(self.vars["DATABASE_URL"].clone()), 4).unwrap()
    }

    /// A user with `credits`, linked (activated) to `sender_id` on `platform`.
    pub async fn user(
        &self,
        platform: hermes_types::model::Platform,
        sender_id: &str,
        credits: i64,
    ) -> hermes_db::users::User {
        self.scoped_user(platform.into(), sender_id, credits).await
    }

    /// A user with `credits`, linked (activated) to the REST `sender_id` of API key `key`.
    pub async fn key_user(
        &self,
        key: hermes_types::ids::ApiKeyId,
        sender_id: &str,
        credits: i64,
    ) -> hermes_db::users::User {
        let scope = hermes_db::users::ChannelScope {
            platform: hermes_types::model::Platform::Rest,
            api_key: Some(key),
        };
        self.scoped_user(scope, sender_id, credits).await
    }

    /// An external agent `key` of the default workspace, woken at `url` and signing with
    /// `secret` (sealed with this environment's `HERMES_SECRET_KEYS`, which must be set).
    pub async fn external_agent(
        &self,
        key: &str,
        url: &str,
        secret: &str,
        max_concurrent: i32,
        mode: hermes_types::agent::EngagementMode,
    ) -> hermes_db::agents::Agent {
        use hermes_db::agents::{self, NewAgent};
        use hermes_types::agent::{AgentKind, Tone};
        let ring = hermes_net::keyring::KeyRing::new(&self.config().router.secret_keys)
            .expect("HERMES_SECRET_KEYS is set");
        let sealed = ring.seal(secret.as_bytes());
        let c = self.db().get().await.unwrap();
        agents::create(
            &c,
            &NewAgent {
                workspace: "default",
                profile_key: key,
                kind: AgentKind::External,
                display_name: key,
                tone: Tone::Professional,
                role: None,
                role_instructions: None,
                tier: None,
                toolsets: &[],
                capabilities: &[],
                webhook_url: Some(url),
                webhook_secret_sealed: Some(&sealed),
                max_concurrent,
                engagement_mode: mode,
            },
        )
        .await
        .unwrap()
    }

    async fn scoped_user(
        &self,
        scope: hermes_db::users::ChannelScope,
        sender_id: &str,
        credits: i64,
    ) -> hermes_db::users::User {
        use hermes_db::users;
        let db = self.db();
        let mut client = db.get().await.unwrap();
        let tx = client.transaction().await.unwrap();
        let user = users::create(
            &tx,
            &users::NewUser {
                workspace: "default",
                display_name: Some(sender_id),
                tier: hermes_types::model::Tier::Free,
                credits,
            },
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        assert!(
            users::link_channel(&client, user.id, scope, sender_id, true, None)
                .await
                .unwrap()
        );
        user
    }

    /// A bus handle on this test's namespace (declares the topology).
    pub async fn bus(&self) -> Bus {
        let c = self.config();
        Bus::connect(
            c.amqp_url.clone(),
            Names::new(Namespace::parse(&self.ns).unwrap()),
            c.bus.clone(),
            Metrics::new(),
        )
        .await
        .expect("RabbitMQ reachable for tests")
    }

    /// Start `services` in this process on free ports, ready when this returns: the way to a
    /// running fleet. A test may start several on one environment (replicas, a restart).
    pub async fn start(&self, services: &[Service]) -> Fleet {
        hermes_net::install_crypto_provider();
        hermes_telemetry::init_tracing(hermes_config::LogFormat::Text);
        let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let http_addr = http.local_addr().unwrap();
        let admin_addr = admin.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let config = self.config();
        let services = services.to_vec();
        let handle = tokio::spawn(async move {
            hermes::run(
                config,
                &services,
                Listeners {
                    http: Some(http),
                    admin: Some(admin),
                },
                async {
                    let _ = rx.await;
                },
            )
            .await
        });
        let fleet = Fleet {
            app: App {
                http: http_addr,
                admin: admin_addr,
            },
            stop: Some(tx),
            handle: Some(handle),
        };
        fleet.wait_ready().await;
        fleet
    }
}

/// What removing a test's corner takes, detached from the [`TestEnv`] being dropped.
struct Leftovers {
    ns: String,
    db_name: String,
    pristine: Option<Pristine>,
    broker: String,
    /// The namespace's wait queues (retry queues and the router's slow lane).
    wait_queues: Vec<String>,
}

impl Leftovers {
    /// Delete the namespace's queues and exchanges and drop the database.
    async fn remove(self) {
        use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
        let props = lapin::ConnectionProperties::default();
        if let (Ok(ns), Ok(conn)) = (
            Namespace::parse(&self.ns),
            lapin::Connection::connect(&self.broker, props).await,
        ) {
            let names = Names::new(ns);
            if let Ok(ch) = conn.create_channel().await {
                for stage in hermes_bus::Stage::ALL {
                    for q in [names.queue(stage), names.parking(stage)] {
                        let _ = ch
                            .queue_delete(q.into(), QueueDeleteOptions::default())
                            .await;
                    }
                }
                for q in self.wait_queues {
                    let _ = ch
                        .queue_delete(q.into(), QueueDeleteOptions::default())
                        .await;
                }
                for e in [names.work_exchange(), names.dead_exchange()] {
                    let _ = ch
                        .exchange_delete(e.into(), ExchangeDeleteOptions::default())
                        .await;
                }
            }
            let _ = conn.close(200, "test done".into()).await;
        }
        // Handed back to the pool of test databases, or dropped.
        if let Some(pristine) = self.pristine {
            match db_server().release(&self.db_name, &pristine).await {
                Ok(Released::WipeFailed(why)) => {
                    eprintln!("test database {} dropped, not kept: {why}", self.db_name);
                }
                Ok(_) => {}
                Err(e) => eprintln!("test database {} not removed: {e}", self.db_name),
            }
        }
    }
}

/// The namespace's queues and exchanges are deleted and the database dropped, also when the
/// test panicked: leftover quorum queues each hold files open on the shared broker, which
/// stalls once hundreds pile up.
impl Drop for TestEnv {
    fn drop(&mut self) {
        let ns = Namespace::parse(&self.ns);
        // A test may have removed its TOML file already: the wait queues are then named from
        // the environment alone (their delays are environment settings), not left behind.
        let config = Config::from_lookup(&|k| self.vars.get(k).cloned(), None).or_else(|_| {
            Config::from_lookup(
                &|k| {
                    (k != "HERMES_CONFIG")
                        .then(|| self.vars.get(k).cloned())
                        .flatten()
                },
                None,
            )
        });
        let wait_queues = match (config, ns) {
            (Ok(c), Ok(ns)) => Names::new(ns).wait_queues(&c.bus),
            _ => Vec::new(),
        };
        let leftovers = Leftovers {
            ns: self.ns.clone(),
            db_name: self.db_name.clone(),
            pristine: self.pristine.take(),
            broker: self.broker.clone(),
            wait_queues,
        };
        // Drop cannot await, and may run on the test's runtime, which cannot be blocked on:
        // the removal gets a thread and a runtime of its own, and the test waits for it so
        // that nothing is left when the process ends.
        let removal =
            std::thread::spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt.block_on(leftovers.remove()),
                    Err(e) => eprintln!("test cleanup: no runtime: {e}"),
                }
            });
        if removal.join().is_err() {
            eprintln!("test cleanup of {} panicked", self.ns);
        }
    }
}
