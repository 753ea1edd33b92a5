//! The process: its three servers, its namespace and addresses, its log and its lifetime;
//! and the variables read outside `Config` that operators still set.

use secrecy::SecretString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::Unset::{Means, Value};
use super::{ReadBy, Setting, kinds, settings};
use crate::{LogFormat, Namespace};

settings! {
    /// Connections, namespace, addresses, logs and lifetime.
    SETTINGS = [
        DATABASE_URL: SecretString {
            kind: kinds::POSTGRES_URL,
            unset: Value("postgres://postgres:postgres@127.0.0.1:5432/hermes"),
            secret: true,
            help: "PostgreSQL connection URL (the truth: runs, outbox, idempotency); `sslmode=require|verify-full` and `sslrootcert=` for TLS (deploy.md)",
        },
        AMQP_URL: SecretString {
            kind: kinds::AMQP_URL,
            unset: Value("amqp://guest:guest@127.0.0.1:5672/%2f"),
            secret: true,
            help: "RabbitMQ connection URL (the bus)",
        },
        REDIS_URL: SecretString {
            kind: kinds::REDIS_URL,
            unset: Value("redis://127.0.0.1:6379"),
            secret: true,
            help: "Redis connection URL (caches, counters, run event streams); `rediss://` for TLS, `?sslrootcert=` for a private CA (deploy.md)",
        },
        HERMES_CACHE_KEY_SECRET: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none: identifiers hashed without a key)"),
            secret: true,
            help: "key of the HMAC that turns platform identifiers (phone numbers, chat and message ids) into Redis key names; set it so a reader of Redis cannot test guesses of a number against them",
        },
        HERMES_NAMESPACE: Namespace {
            kind: kinds::NAMESPACE,
            unset: Value("hermes"),
            secret: false,
            help: "prefix of every queue and Redis key; two installs on one broker use two namespaces (1–40 characters of `a-z0-9_-`, starting with a letter)",
        },
        HERMES_CONFIG: PathBuf {
            kind: kinds::PATH,
            unset: Means("(none: built-in tiers and models)"),
            secret: false,
            help: "path of the TOML file with tiers, model chains and API settings (same as `--config`)",
        },
        HERMES_HTTP_ADDR: SocketAddr {
            kind: kinds::SOCKET_ADDR,
            unset: Value("0.0.0.0:8080"),
            secret: false,
            help: "public HTTP address of ingest",
        },
        HERMES_ADMIN_ADDR: SocketAddr {
            kind: kinds::SOCKET_ADDR,
            unset: Value("0.0.0.0:9090"),
            secret: false,
            help: "admin address: `/metrics`, `/healthz`, `/readyz`",
        },
        HERMES_LOG_FORMAT: LogFormat {
            kind: kinds::LOG_FORMAT,
            unset: Value("json"),
            secret: false,
            help: "log format: `json` (production) or `text`",
        },
        HERMES_SHUTDOWN_GRACE_SECS: Duration {
            kind: kinds::SECS,
            unset: Value("60"),
            secret: false,
            help: "how long SIGTERM waits for in-flight work (ingest's requests get a third of it beside stages, all of it alone); longer than one model call (`HERMES_LLM_TIMEOUT_SECS`), and what is still running then is handed back to its queue",
        },
        HERMES_DB_POOL_SIZE: usize {
            kind: kinds::COUNT_TWO_OR_MORE,
            unset: Value("16"),
            secret: false,
            help: "PostgreSQL connections per process (at least 2)",
        },
        HERMES_DB_STATEMENT_TIMEOUT_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("30"),
            secret: false,
            help: "services' PostgreSQL `statement_timeout`: a statement running longer is cancelled (a failure of its message, not an outage)",
        },
        HERMES_DB_IDLE_IN_TX_TIMEOUT_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("60"),
            secret: false,
            help: "services' PostgreSQL `idle_in_transaction_session_timeout`: a transaction left idle this long is ended by the server, releasing its locks",
        },
    ]
}

/// `RUST_LOG`, read by the log set-up rather than `Config`.
pub static RUST_LOG: Setting = Setting {
    name: "RUST_LOG",
    unset: Value("info"),
    help: "log filter, e.g. `info,hermes_llm=debug` (unset, it is `info` with lapin, amq_protocol and tokio_postgres at `warn`)",
    secret: false,
    read_by: ReadBy::Telemetry,
};

/// `MALLOC_ARENA_MAX`, read by glibc.
pub static MALLOC_ARENA_MAX: Setting = Setting {
    name: "MALLOC_ARENA_MAX",
    unset: Means("(glibc's)"),
    help: "not ours but recommended: `2` keeps ingest's memory ~10 MiB lower under load (the Dockerfile sets it)",
    secret: false,
    read_by: ReadBy::Platform,
};

/// Variables set for Hermes that `Config` does not read.
pub static OUTSIDE: &[&Setting] = &[&RUST_LOG, &MALLOC_ARENA_MAX];
