//! The Hermes test kit: each test gets its own namespace (queues and Redis keys) and its own
//! database cloned from a migrated template, and can start any set of services in-process on
//! free ports, or the real binary. The end-to-end tests (`tests/`) and any crate testing
//! against the real servers use it.

pub mod chaos;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

use hermes::{Listeners, Service};
use hermes_bus::{Bus, Names};
use hermes_config::{Config, Namespace};
use hermes_db::{Db, migrate};
use hermes_telemetry::Metrics;
use secrecy::SecretString;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_postgres::NoTls;

/// The Bearer key every test fleet uses.
pub const KEY: &str = "test-key-0123456789abcdef";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// Server URL of the PostgreSQL instance the tests use (any database; we switch names).
pub fn pg_base() -> String {
    env_or(
        "DATABASE_URL",
        "postgres://postgres:postgres@127.0.0.1:5432/postgres",
    )
}

fn pg_config(dbname: &str) -> tokio_postgres::Config {
    let mut c = tokio_postgres::Config::from_str(&pg_base()).expect("DATABASE_URL parses");
    c.dbname(dbname);
    c
}

fn url_with_db(dbname: &str) -> String {
    let mut u = url::Url::parse(&pg_base()).expect("DATABASE_URL is a URL");
    u.set_path(&format!("/{dbname}"));
    u.to_string()
}

async fn admin_exec(sql: &str) -> Result<(), tokio_postgres::Error> {
    let (client, conn) = pg_config("postgres").connect(NoTls).await?;
    let driver = tokio::spawn(conn);
    let r = client.batch_execute(sql).await;
    drop(client);
    let _ = driver.await;
    r
}

/// The migrated template database, named after the migrations it holds (created once;
/// concurrent test processes serialize on an advisory lock).
async fn template() -> String {
    let mut h = Sha256::new();
    for m in migrate::MIGRATIONS {
        h.update(m.sql.as_bytes());
    }
    let name = format!("hermes_tpl_{}", &hex::encode(h.finalize())[..12]);
    let (client, conn) = pg_config("postgres")
        .connect(NoTls)
        .await
        .expect("PostgreSQL reachable for tests");
    let driver = tokio::spawn(conn);
    client
        .execute("SELECT pg_advisory_lock(778899)", &[])
        .await
        .unwrap();
    let exists = client
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await
        .unwrap()
        .is_some();
    if !exists {
        let building = format!("{name}_building");
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {building}"))
            .await
            .unwrap();
        client
            .batch_execute(&format!("CREATE DATABASE {building}"))
            .await
            .unwrap();
        {
            let db = Db::new(&SecretString::from(url_with_db(&building)), 1).unwrap();
            migrate::run(&db).await.expect("template migrates");
        }
        // The pool's connection closes asynchronously; the rename needs it gone.
        for _ in 0..50 {
            if client
                .batch_execute(&format!("ALTER DATABASE {building} RENAME TO {name}"))
                .await
                .is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    client
        .execute("SELECT pg_advisory_unlock(778899)", &[])
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
    name
}

/// One test's private corner of the shared servers.
pub struct TestEnv {
    pub ns: String,
    pub db_name: String,
    pub vars: HashMap<String, String>,
}

impl TestEnv {
    /// A fresh namespace and database; variables default to an in-process mock fleet.
    pub async fn new() -> Self {
        hermes_net::install_crypto_provider();
        let id = &uuid::Uuid::now_v7().simple().to_string()[20..];
        let ns = format!("t{id}");
        let db_name = format!("hermes_t{id}");
        let tpl = template().await;
        let mut last = None;
        for _ in 0..50 {
            match admin_exec(&format!("CREATE DATABASE {db_name} TEMPLATE {tpl}")).await {
                Ok(()) => {
                    last = None;
                    break;
                }
                Err(e) => {
                    last = Some(e);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        if let Some(e) = last {
            panic!("cannot create test database: {e}");
        }
        let mut vars = HashMap::new();
        vars.insert("DATABASE_URL".into(), url_with_db(&db_name));
        vars.insert(
            "AMQP_URL".into(),
            env_or("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f"),
        );
        vars.insert(
            "REDIS_URL".into(),
            env_or("REDIS_URL", "redis://127.0.0.1:6379"),
        );
        vars.insert("HERMES_NAMESPACE".into(), ns.clone());
        vars.insert("HERMES_PROVIDER".into(), "mock".into());
        vars.insert("API_SERVER_KEY".into(), KEY.into());
        vars.insert("HERMES_LOG_FORMAT".into(), "text".into());
        // A backstop for tests that panic before `cleanup`: every quorum queue holds open files
        // on the broker, so leftovers must not pile up.
        vars.insert("HERMES_QUEUE_EXPIRES_SECS".into(), "120".into());
        vars.insert("HERMES_SHUTDOWN_GRACE_SECS".into(), "15".into());
        vars.insert("HERMES_RUN_TIMEOUT_SECS".into(), "30".into());
        vars.insert("HERMES_HTTP_ADDR".into(), "127.0.0.1:0".into());
        vars.insert("HERMES_ADMIN_ADDR".into(), "127.0.0.1:0".into());
        Self { ns, db_name, vars }
    }

    pub fn set(&mut self, name: &str, value: &str) -> &mut Self {
        self.vars.insert(name.into(), value.into());
        self
    }

    pub fn config(&self) -> Config {
        let vars = self.vars.clone();
        Config::from_lookup(&move |k| vars.get(k).cloned(), None)
            .expect("test configuration is valid")
    }

    /// Route this test's broker connections through a [`chaos::ChaosProxy`]; returns the proxy
    /// and the broker's own address (for cleanup, which must bypass the proxy).
    pub async fn broker_behind_proxy(&mut self) -> (chaos::ChaosProxy, SocketAddr) {
        let amqp = url::Url::parse(&self.vars["AMQP_URL"]).expect("AMQP_URL is a URL");
        let target = format!(
            "{}:{}",
            amqp.host_str().unwrap_or("127.0.0.1"),
            amqp.port().unwrap_or(5672)
        );
        let target = tokio::net::lookup_host(target)
            .await
            .unwrap()
            .next()
            .expect("broker address");
        let proxy = chaos::ChaosProxy::start(target).await;
        self.set(
            "AMQP_URL",
            &format!("amqp://guest:guest@{}/%2f", proxy.addr),
        );
        (proxy, target)
    }

    /// Point this test back at the broker itself (before `cleanup`).
    pub fn broker_direct(&mut self, target: SocketAddr) {
        self.set("AMQP_URL", &format!("amqp://guest:guest@{target}/%2f"));
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
            users::link_channel(&client, user.id, platform, sender_id, true, None)
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

    /// Start `services` in this process on free ports.
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
            http: http_addr,
            admin: admin_addr,
            stop: Some(tx),
            handle: Some(handle),
        };
        fleet.wait_ready().await;
        fleet
    }

    /// Delete this test's queues and exchanges and drop its database.
    pub async fn cleanup(self) {
        use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
        let names = Names::new(Namespace::parse(&self.ns).unwrap());
        let props = lapin::ConnectionProperties::default();
        if let Ok(conn) = lapin::Connection::connect(&self.vars["AMQP_URL"], props).await {
            if let Ok(ch) = conn.create_channel().await {
                for stage in hermes_bus::Stage::ALL {
                    for q in [names.queue(stage), names.parking(stage)] {
                        let _ = ch
                            .queue_delete(q.into(), QueueDeleteOptions::default())
                            .await;
                    }
                }
                for q in names.wait_queues(&self.config().bus.retry_delays) {
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
        let _ = admin_exec(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.db_name
        ))
        .await;
    }
}

/// A fleet started in-process.
pub struct Fleet {
    pub http: SocketAddr,
    pub admin: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Fleet {
    async fn wait_ready(&self) {
        let started = Instant::now();
        loop {
            if reqwest::get(format!("http://{}/readyz", self.admin))
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return;
            }
            if let Some(h) = &self.handle {
                assert!(!h.is_finished(), "fleet stopped during start");
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "fleet not ready within 30s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.http, path)
    }

    /// The Prometheus text the fleet's admin server exports.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.admin))
            .await
            .expect("admin server answers")
            .text()
            .await
            .expect("metrics are text")
    }

    /// POST a chat completion with `text` as the user message.
    pub async fn chat(&self, text: &str) -> reqwest::Response {
        reqwest::Client::new()
            .post(self.url("/v1/chat/completions"))
            // Longer than HERMES_RUN_TIMEOUT_SECS (30 s in tests): a hang fails the test.
            .timeout(Duration::from_secs(90))
            .bearer_auth(KEY)
            .json(&serde_json::json!({"model": "hermes", "messages": [{"role": "user", "content": text}]}))
            .send()
            .await
            .expect("ingest answers")
    }

    /// Stop the fleet the way SIGTERM does and return its result.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.handle
            .take()
            .expect("running")
            .await
            .expect("fleet task did not panic")
    }
}

/// An inbound API message with one user turn, as ingest would publish it.
pub fn api_inbound(text: &str) -> hermes_types::model::Inbound {
    use hermes_types::model::{ChatMessage, Inbound, MessageEvent, Platform, Role};
    Inbound {
        event: MessageEvent {
            platform: Platform::Api,
            sender_id: "api".into(),
            chat_id: "api".into(),
            text: Some(text.into()),
            media: Vec::new(),
            external_message_id: None,
            sender_name: None,
            received_at: chrono::Utc::now(),
            metadata: None,
        },
        conversation: vec![ChatMessage::text(Role::User, text)],
        requested_model: None,
        callback_url: None,
        api_key_id: None,
        params: Default::default(),
        stream: false,
    }
}

/// A REST-channel message from `sender`, as ingest would publish it to the router.
pub fn rest_inbound(sender: &str, text: &str) -> hermes_types::model::Inbound {
    use hermes_types::model::{MessageEvent, Platform};
    let mut inbound = api_inbound(text);
    inbound.event = MessageEvent {
        platform: Platform::Rest,
        sender_id: sender.into(),
        chat_id: sender.into(),
        ..inbound.event
    };
    // Channels send one message; the router supplies the history.
    inbound.conversation = Vec::new();
    inbound
}

/// A chat completions answer as an OpenAI-compatible provider sends it.
pub fn openai_answer(text: &str, prompt_tokens: u64, completion_tokens: u64) -> serde_json::Value {
    serde_json::json!({
        "id": "chatcmpl-test", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens}
    })
}

/// A chat completions answer that asks for one tool call (`call_1`), with 30/9 tokens.
pub fn openai_tool_call(tool: &str, arguments: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "id": "c1", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": tool, "arguments": arguments.to_string()}}
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}
    })
}

/// Take every message waiting in `stage`'s queue (acking them), decoded.
pub async fn drain(bus: &Bus, stage: hermes_bus::Stage) -> Vec<hermes_types::envelope::Envelope> {
    use lapin::options::{BasicAckOptions, BasicGetOptions};
    let ch = bus.channel().await.expect("channel");
    let mut out = Vec::new();
    while let Some(m) = ch
        .basic_get(bus.names().queue(stage).into(), BasicGetOptions::default())
        .await
        .expect("basic.get")
    {
        out.push(hermes_types::envelope::Envelope::from_slice(&m.delivery.data).expect("envelope"));
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .expect("ack");
    }
    out
}

/// `SELECT count(*) …` on this test's database.
pub async fn count(
    db: &Db,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> i64 {
    let client = db.get().await.expect("database connection");
    client
        .query_one(sql, params)
        .await
        .expect("count query")
        .get(0)
}

/// Poll `f` until it returns `Some`, or panic after `timeout`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

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
