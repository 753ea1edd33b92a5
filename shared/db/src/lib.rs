//! PostgreSQL, the truth (docs/architecture.md#9-postgresql): the connection pool, the schema-version check that
//! keeps services off an older schema, idempotency records, and the outbox.

pub mod a2a_tasks;
pub mod agent_inbox;
pub mod agents;
pub mod api_keys;
pub mod approvals;
pub mod budgets;
pub mod bursts;
pub mod console_sessions;
pub mod credits;
pub mod delegations;
pub mod delivery_sends;
pub mod drafts;
pub mod dreams;
pub mod erase;
pub mod event_hub;
pub mod events;
pub mod forge_answers;
pub mod forge_deliveries;
pub mod forge_presence;
pub mod forge_usage;
pub mod idempotency;
pub mod inbox;
pub mod interactions;
pub mod jobs;
pub mod leases;
pub mod listen;
pub mod memory;
pub mod messenger_windows;
pub mod migrate;
pub mod operator_send;
pub mod opt_outs;
pub mod outbox;
pub mod platform_sends;
pub mod proxied;
pub mod responses;
pub mod retention;
pub mod round_robin;
pub mod runs;
#[cfg(any(test, feature = "testing"))]
pub mod scratch;
pub mod sessions;
pub mod tls;
pub mod tool_registry;
pub mod users;
pub mod webhook_deliveries;
pub mod whatsapp_windows;
pub mod workspace_api;
pub mod workspaces;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::Notify;

pub use deadpool_postgres::{GenericClient, Object as Client, Transaction};

/// A commit waiting this long for a synchronous standby makes [`Db::ping`] fail: readiness
/// turns red while a primary waits for a standby it does not have.
pub const COMMIT_WAIT_NOT_READY: Duration = Duration::from_secs(10);
pub use listen::{ListenEvent, listen};

use hermes_types::ids::MessageId;

/// What can go wrong with the database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("DATABASE_URL is invalid: {0}")]
    Url(#[source] tokio_postgres::Error),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    #[error("cannot get a database connection: {}", pool_detail(.0))]
    Pool(#[from] deadpool_postgres::PoolError),
    #[error("database error: {}", pg_detail(.0))]
    Query(#[from] tokio_postgres::Error),
    #[error(
        "database schema is at version {found}, this build needs {needed}: run `hermes migrate` first"
    )]
    SchemaTooOld { found: i64, needed: i64 },
    #[error("migration {version} ({name}) was changed after it was applied (checksum mismatch)")]
    MigrationChanged { version: i64, name: String },
    /// A stored value this build cannot read or write (an unknown status or kind, JSON that
    /// does not decode): the data is wrong, and retrying will not change it.
    #[error("{0}")]
    Invalid(String),
    /// What the call names does not exist (a user, agent, workspace, approval), or no longer
    /// does.
    #[error("{0}")]
    NotFound(String),
    /// A precondition the caller must fix: a balance that would go negative, a key without
    /// scopes, `HERMES_SECRET_KEYS` unset or unable to open a secret, a profile key taken, a
    /// value out of range.
    #[error("{0}")]
    Refused(String),
    /// The server answers, but commits wait for a synchronous standby it does not have.
    #[error(
        "commits wait for a synchronous standby: {sessions} session(s), the longest for {longest_secs} s (a primary whose required standby is gone: docs/deploy.md, \"Durability of the dependencies\")"
    )]
    CommitsWaiting { sessions: i64, longest_secs: i64 },
}

impl DbError {
    /// Is PostgreSQL (or the way to it) unavailable, rather than this statement wrong? A
    /// connection that cannot be made or was lost, a pool with nothing to give, a server
    /// starting up, shutting down or out of connections. Constraint violations, bad SQL and
    /// statement timeouts are not: they belong to the message that caused them
    /// (docs/architecture.md, poison and outages).
    pub fn is_unavailable(&self) -> bool {
        match self {
            DbError::Pool(deadpool_postgres::PoolError::Backend(e)) | DbError::Query(e) => {
                pg_unavailable(e)
            }
            DbError::Pool(_) | DbError::CommitsWaiting { .. } => true,
            _ => false,
        }
    }
}

/// The unique indexes that stop a second copy of one message doing its work again, where
/// the statement does not skip the conflict itself (`processed_messages` does, with
/// `ON CONFLICT DO NOTHING`): a run's charge and refund.
const ONCE_PER_MESSAGE: [&str; 1] = ["credit_ledger_once"];

impl DbError {
    /// Did a copy of this message, processed at the same time, commit the same effect
    /// first? PostgreSQL raises a unique violation only once the other transaction has
    /// committed (it waits for it), so the message is a duplicate: its stage acks it rather
    /// than spend one of its deliveries on a retry that would find it processed.
    pub fn is_concurrent_copy(&self) -> bool {
        let DbError::Query(e) = self else {
            return false;
        };
        e.as_db_error().is_some_and(|db| {
            *db.code() == tokio_postgres::error::SqlState::UNIQUE_VIOLATION
                && db
                    .constraint()
                    .is_some_and(|c| ONCE_PER_MESSAGE.contains(&c))
        })
    }
}

fn pg_unavailable(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(code) => {
            code.code().starts_with("08")
                || [
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                    SqlState::TOO_MANY_CONNECTIONS,
                ]
                .contains(code)
        }
        // No server error: the socket (refused, reset, timed out) is an outage; a value
        // that does not convert is a bug of ours, not one.
        None => {
            let text = e.to_string();
            [
                "error connecting",
                "error communicating",
                "timeout waiting",
                "connection closed",
            ]
            .iter()
            .any(|p| text.starts_with(p))
                || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
        }
    }
}

/// `sql` prepared once per pooled connection: hot statements then skip the parse and plan
/// round trip that an unprepared query costs on every call.
pub async fn stmt(c: &impl GenericClient, sql: &str) -> Result<tokio_postgres::Statement, DbError> {
    Ok(c.prepare_cached(sql).await?)
}

/// The server's own message when there is one (tokio-postgres' Display says only "db error").
fn pg_detail(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    }
}

fn pool_detail(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(pg) => pg_detail(pg),
        other => other.to_string(),
    }
}

/// Server-side bounds on a pooled session.
#[derive(Debug, Clone, Copy)]
pub struct SessionLimits {
    pub statement: Duration,
    pub idle_in_transaction: Duration,
}

/// A snapshot of the connection pool ([`Db::pool_status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolStatus {
    pub open: usize,
    pub idle: usize,
    pub max: usize,
    pub waiting: usize,
}

/// The connection pool, cheap to clone.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
    /// Shared: a `Db` is cloned into every context, request and message.
    config: Arc<tokio_postgres::Config>,
    /// The TLS of every connection (`sslmode` in `DATABASE_URL`).
    tls: tls::PgTls,
    relay: Arc<LocalRelay>,
}

/// The outbox relay running in this process, if any. While it runs, stages publish the rows
/// they commit themselves (docs/architecture.md#2-every-state-change-travels-with-its-message-the-outbox): the rows skip `NOTIFY`,
/// whose commit-time lock serializes every committing transaction of the database (and holds
/// it across the WAL flush), and the ids they published wait here for the relay's marker,
/// which marks them all with one statement.
#[derive(Default)]
pub struct LocalRelay {
    running: AtomicBool,
    published: std::sync::Mutex<Vec<i64>>,
    marks: Notify,
}

impl LocalRelay {
    /// Is a relay of this process running (so its marker marks what stages publish)? Else
    /// stages leave their rows to the relays and their commits `NOTIFY`.
    pub fn running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    pub fn set_running(&self, on: bool) {
        self.running.store(on, Ordering::Release);
    }

    /// Rows a stage published (confirmed by the broker), for the marker to mark.
    pub fn published(&self, ids: &[i64]) {
        if ids.is_empty() {
            return;
        }
        if let Ok(mut waiting) = self.published.lock() {
            waiting.extend_from_slice(ids);
        }
        self.marks.notify_one();
    }

    /// Every id waiting to be marked, taken.
    pub fn take_published(&self) -> Vec<i64> {
        self.published
            .lock()
            .map(|mut waiting| std::mem::take(&mut *waiting))
            .unwrap_or_default()
    }

    /// Resolves once ids are waiting (at once if some arrived since the last call).
    pub async fn marks_waiting(&self) {
        self.marks.notified().await;
    }
}

impl Db {
    /// This process's outbox relay handle.
    pub fn local_relay(&self) -> &LocalRelay {
        &self.relay
    }

    /// Build a pool (lazy: no connection is made until first use).
    pub fn new(url: &SecretString, size: usize) -> Result<Self, DbError> {
        Self::with_limits(url, size, None)
    }

    /// A pool whose sessions carry a `statement_timeout` and an
    /// `idle_in_transaction_session_timeout` (the services' pools; operator commands such as
    /// `hermes migrate` run unbounded).
    pub fn with_limits(
        url: &SecretString,
        size: usize,
        limits: Option<SessionLimits>,
    ) -> Result<Self, DbError> {
        let (mut config, tls) = tls::parse(url.expose_secret())?;
        if let Some(l) = limits {
            let mut options = config.get_options().unwrap_or_default().to_string();
            options.push_str(&format!(
                " -c statement_timeout={} -c idle_in_transaction_session_timeout={}",
                l.statement.as_millis(),
                l.idle_in_transaction.as_millis()
            ));
            config.options(options.trim());
        }
        config.connect_timeout(Duration::from_secs(5));
        if config.get_application_name().is_none() {
            config.application_name("hermes");
        }
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(5)))
            .recycle_timeout(Some(Duration::from_secs(5)))
            .build()
            .expect("pool configuration is valid");
        Ok(Self {
            pool,
            config: Arc::new(config),
            tls,
            relay: Arc::default(),
        })
    }

    pub async fn get(&self) -> Result<Client, DbError> {
        Ok(self.pool.get().await?)
    }

    /// The pool's connections now: open, idle among them, the most it may open, and the
    /// callers waiting for one (for `GET /health/detailed`).
    pub fn pool_status(&self) -> PoolStatus {
        let s = self.pool.status();
        PoolStatus {
            open: s.size,
            idle: s.available,
            max: s.max_size,
            waiting: s.waiting,
        }
    }

    /// The parsed connection settings (for LISTEN connections and database creation).
    pub fn pg_config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The TLS connector `DATABASE_URL` asks for, for connections made outside the pool.
    pub fn tls(&self) -> tls::PgTls {
        self.tls.clone()
    }

    /// Refuse to run against a schema older than this build's migrations.
    pub async fn check_schema(&self) -> Result<i64, DbError> {
        let client = self.get().await?;
        let found = migrate::current_version(&client).await?;
        let needed = migrate::latest_version();
        if found < needed {
            return Err(DbError::SchemaTooOld { found, needed });
        }
        Ok(found)
    }

    /// A cheap query for readiness: the server answers, and no commit of this role has
    /// waited longer than [`COMMIT_WAIT_NOT_READY`] for a synchronous standby. A read
    /// answers even when every commit waits (a primary that requires a standby and has none),
    /// so the wait is read from `pg_stat_activity` (docs/deploy.md, "Durability of the
    /// dependencies").
    pub async fn ping(&self) -> Result<(), DbError> {
        let row = self
            .get()
            .await?
            .query_one(
                "SELECT count(*), COALESCE(max(extract(epoch FROM now() - query_start)), 0)::bigint \
                 FROM pg_stat_activity WHERE wait_event = 'SyncRep' \
                 AND query_start < now() - make_interval(secs => $1)",
                &[&COMMIT_WAIT_NOT_READY.as_secs_f64()],
            )
            .await?;
        let (sessions, longest_secs): (i64, i64) = (row.get(0), row.get(1));
        if sessions > 0 {
            return Err(DbError::CommitsWaiting {
                sessions,
                longest_secs,
            });
        }
        Ok(())
    }
}

/// Has `consumer` already processed `message_id`? A cheap pre-check before slow work.
pub async fn already_processed(
    client: &Client,
    consumer: &str,
    message_id: MessageId,
) -> Result<bool, DbError> {
    let row = client
        .query_opt(
            &stmt(
                client,
                "SELECT 1 FROM processed_messages WHERE consumer = $1 AND message_id = $2",
            )
            .await?,
            &[&consumer, &message_id.as_uuid()],
        )
        .await?;
    Ok(row.is_some())
}
