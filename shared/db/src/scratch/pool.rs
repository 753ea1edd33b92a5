//! Test databases handed out from a pool instead of created and dropped for every test
//! (docs/development.md, "Test databases").
//!
//! Every test database is a clone of one migrated template, named after the migrations it
//! holds. Cloning is what costs: PostgreSQL 15 copies a template by writing every page of it,
//! system catalogs included, to the WAL, about 0.5 to 0.8 s of the server's CPU, where wiping
//! the rows a test wrote takes milliseconds. So a test's database, once the test is done, is
//! wiped back to the rows it was handed out with and kept for the next test.
//!
//! A database moves through three names, each given by a rename, which PostgreSQL refuses
//! while any other session is on the database:
//! `hermes_pool_<template>_<id>` (clean, free) → the test's own name (in use) →
//! `hermes_reset_<template>_<id>` (being wiped) → `hermes_pool_…` again. Two tests taking the
//! same free database race on its rename, and one of them loses. A process a test left running
//! knows only the test's own name, so it cannot reach the database once it is handed on. A
//! database whose schema a test changed (a table or a trigger of its own) is dropped instead of
//! kept, as is one that cannot be wiped.

use std::future::Future;
use std::time::Duration;

use futures_util::future::try_join_all;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use tokio_postgres::Client;

use crate::tls::{self, PgTls};
use crate::{Db, DbError, migrate};

/// At most this many clean databases wait in the pool; a test's beyond them is dropped.
/// Enough for the suite's parallel tests, some of which run two fleets.
const POOL_MAX: i64 = 12;

/// Serializes building the template across test processes.
const TEMPLATE_LOCK: i64 = 778_899;

/// The PostgreSQL server the test databases live on.
#[derive(Clone)]
pub struct Server {
    url: url::Url,
    config: tokio_postgres::Config,
    tls: PgTls,
}

impl Server {
    /// The server of `url` (whatever database it names).
    pub fn new(url: &SecretString) -> Result<Self, DbError> {
        let (config, tls) = tls::parse(url.expose_secret())?;
        let url = url::Url::parse(url.expose_secret())
            .map_err(|e| DbError::Refused(format!("DATABASE_URL: {e}")))?;
        Ok(Self { url, config, tls })
    }

    /// The URL of database `name` on this server.
    pub fn url_of(&self, name: &str) -> SecretString {
        let mut url = self.url.clone();
        url.set_path(&format!("/{name}"));
        SecretString::from(url.to_string())
    }

    /// A session on database `name`; the connection ends when the client is dropped.
    async fn connect(&self, name: &str) -> Result<Client, DbError> {
        let mut config = self.config.clone();
        config.dbname(name);
        let (client, conn) = config.connect(self.tls.clone()).await?;
        tokio::spawn(conn);
        Ok(client)
    }

    async fn admin(&self) -> Result<Client, DbError> {
        self.connect("postgres").await
    }

    /// The migrated template, named after the migrations this build holds, built by the first
    /// process that asks for it.
    pub async fn template(&self) -> Result<String, DbError> {
        let name = template_name();
        let admin = self.admin().await?;
        admin
            .execute("SELECT pg_advisory_lock($1)", &[&TEMPLATE_LOCK])
            .await?;
        let built = self.build_template(&admin, &name).await;
        admin
            .execute("SELECT pg_advisory_unlock($1)", &[&TEMPLATE_LOCK])
            .await?;
        built.map(|()| name)
    }

    async fn build_template(&self, admin: &Client, name: &str) -> Result<(), DbError> {
        if exists(admin, name).await? {
            return Ok(());
        }
        let building = format!("{name}_building");
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {building}"))
            .await?;
        admin
            .batch_execute(&format!("CREATE DATABASE {building}"))
            .await?;
        {
            let db = Db::new(&self.url_of(&building), 1)?;
            migrate::run(&db).await?;
        }
        // A pool of an older template holds databases this build cannot use.
        let stale = admin
            .query(
                "SELECT datname FROM pg_database WHERE datname LIKE 'hermes\\_pool\\_%'
                   AND datname NOT LIKE $1",
                &[&pool_pattern(name)],
            )
            .await?;
        for row in stale {
            let db: String = row.get(0);
            let _ = admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
                .await;
        }
        rename(admin, &building, name).await
    }

    /// Make database `name` as a clone of the migrated template, when there is one (the
    /// tests make it); `false`: there is none, and nothing was made.
    pub async fn clone_if_templated(&self, name: &str) -> Result<bool, DbError> {
        let template = template_name();
        let admin = self.admin().await?;
        if !exists(&admin, &template).await? {
            return Ok(false);
        }
        clone_template(&admin, &template, name).await?;
        Ok(true)
    }

    /// Make database `name` for a test: a clean one from the pool, renamed, or else a new
    /// clone of the template. Returns what it held when handed out, to wipe it back to.
    pub async fn claim(&self, name: &str) -> Result<Pristine, DbError> {
        let template = self.template().await?;
        let admin = self.admin().await?;
        let free = admin
            .query(
                "SELECT datname FROM pg_database WHERE datname LIKE $1 ORDER BY datname",
                &[&pool_pattern(&template)],
            )
            .await?;
        let mut claimed = false;
        for row in free {
            let candidate: String = row.get(0);
            // Lost to another test (it no longer exists) or in use: try the next.
            if admin
                .batch_execute(&format!("ALTER DATABASE {candidate} RENAME TO {name}"))
                .await
                .is_ok()
            {
                claimed = true;
                break;
            }
        }
        if !claimed {
            clone_template(&admin, &template, name).await?;
        }
        let read = async { Pristine::read(&self.connect(name).await?).await }.await;
        if read.is_err() {
            admin
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await?;
        }
        read
    }

    /// Hand database `name` back: wiped to `pristine` and kept in the pool, or dropped when it
    /// cannot be (its schema changed, the pool is full, the wipe failed). Sessions still on it
    /// are ended either way.
    pub async fn release(&self, name: &str, pristine: &Pristine) -> Result<Released, DbError> {
        let template = template_name();
        let admin = self.admin().await?;
        let pooled = format!("{}_{}", pool_prefix(&template), suffix(name));
        let resetting = format!("hermes_reset_{}_{}", template_hash(&template), suffix(name));
        let outcome = async {
            let full: i64 = admin
                .query_one(
                    "SELECT count(*) FROM pg_database WHERE datname LIKE $1",
                    &[&pool_pattern(&template)],
                )
                .await?
                .get(0);
            if full >= POOL_MAX {
                return Ok(Released::PoolFull);
            }
            rename(&admin, name, &resetting).await?;
            if !pristine.restore(&self.connect(&resetting).await?).await? {
                return Ok(Released::SchemaChanged);
            }
            rename(&admin, &resetting, &pooled).await?;
            Ok::<_, DbError>(Released::Pooled)
        }
        .await
        .unwrap_or_else(|e| Released::WipeFailed(e.to_string()));
        if outcome != Released::Pooled {
            for db in [name, resetting.as_str()] {
                admin
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
                    .await?;
            }
        }
        Ok(outcome)
    }
}

/// What became of a database handed back.
#[derive(Debug, PartialEq, Eq)]
pub enum Released {
    /// Wiped and kept for the next test.
    Pooled,
    /// Dropped: the pool already holds [`POOL_MAX`] clean databases.
    PoolFull,
    /// Dropped: the test changed its schema.
    SchemaChanged,
    /// Dropped: it could not be wiped (the reason; wiping needs a superuser).
    WipeFailed(String),
}

/// What a test database held when it was handed out: the rows of the tables that had any
/// (the migrations' own), the sequences' positions and a fingerprint of its schema.
#[derive(Debug, PartialEq)]
pub struct Pristine {
    tables: Vec<String>,
    rows: Vec<(String, serde_json::Value)>,
    sequences: Vec<(String, i64, bool)>,
    schema: String,
}

/// Every object a test could add or change with DDL, as one string: relations and their
/// columns, functions, triggers (with whether they fire), schemas and extensions.
const SCHEMA_FINGERPRINT: &str = "
SELECT md5(string_agg(x, ',' ORDER BY x)) FROM (
  SELECT 'r ' || c.oid::regclass::text || ' ' || c.relkind::text || c.relpersistence::text
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
  UNION ALL
  SELECT 'a ' || a.attrelid::regclass::text || '.' || a.attname || ' ' || a.atttypid::regtype::text
         || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE a.attnum > 0 AND NOT a.attisdropped
     AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
  UNION ALL
  SELECT 'f ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
   WHERE n.nspname NOT IN ('pg_catalog', 'information_schema')
  UNION ALL
  SELECT 't ' || t.tgrelid::regclass::text || ' ' || t.tgname || ' ' || t.tgenabled::text
    FROM pg_trigger t
  UNION ALL
  SELECT 'c ' || conrelid::regclass::text || ' ' || conname FROM pg_constraint
   WHERE connamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
  UNION ALL
  SELECT 'n ' || nspname FROM pg_namespace
  UNION ALL
  SELECT 'e ' || extname || ' ' || extversion FROM pg_extension
) objects(x)";

impl Pristine {
    /// Read what `client`'s database holds now (it has just been handed out, so it is clean).
    pub(crate) async fn read(client: &Client) -> Result<Self, DbError> {
        let tables: Vec<String> = client
            .query(
                "SELECT c.oid::regclass::text FROM pg_class c
                   JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE c.relkind IN ('r', 'p')
                    AND n.nspname NOT IN ('pg_catalog', 'information_schema')
                    AND n.nspname NOT LIKE 'pg\\_%'
                  ORDER BY 1",
                &[],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        // One round trip for them all: the queries are pipelined on the one connection.
        let contents = try_join_all(tables.iter().map(|t| {
            let sql = format!("SELECT json_agg(t) FROM {t} t");
            async move { client.query_one(&sql, &[]).await }
        }))
        .await?;
        let rows = tables
            .iter()
            .zip(contents)
            .filter_map(|(t, row)| {
                row.get::<_, Option<serde_json::Value>>(0)
                    .map(|v| (t.clone(), v))
            })
            .collect();
        let sequences = client
            .query(
                "SELECT format('%I.%I', schemaname, sequencename), coalesce(last_value, start_value),
                        last_value IS NOT NULL
                   FROM pg_sequences",
                &[],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        let schema = client.query_one(SCHEMA_FINGERPRINT, &[]).await?.get(0);
        Ok(Self {
            tables,
            rows,
            sequences,
            schema,
        })
    }

    /// Wipe `client`'s database back to this state, in one transaction. `false`: its schema
    /// is no longer the one handed out, so it is not wiped (and must not be kept).
    pub(crate) async fn restore(&self, client: &Client) -> Result<bool, DbError> {
        let schema: String = client.query_one(SCHEMA_FINGERPRINT, &[]).await?.get(0);
        if schema != self.schema {
            return Ok(false);
        }
        let deletes: String = self
            .tables
            .iter()
            .map(|t| format!("DELETE FROM {t};"))
            .collect();
        // `replica` skips the foreign keys' triggers, so the tables empty in any order
        // (it needs a superuser; without one the wipe fails and the database is dropped).
        client
            .batch_execute(&format!(
                "BEGIN; SET LOCAL session_replication_role = replica; {deletes}"
            ))
            .await?;
        try_join_all(self.rows.iter().map(|(table, rows)| {
            let sql = format!(
                "INSERT INTO {table} OVERRIDING SYSTEM VALUE
                 SELECT * FROM json_populate_recordset(NULL::{table}, $1)"
            );
            async move { client.execute(&sql, &[rows]).await }
        }))
        .await?;
        try_join_all(
            self.sequences
                .iter()
                .map(|(seq, value, called)| async move {
                    client
                        .execute(
                            "SELECT setval($1::text::regclass, $2, $3)",
                            &[seq, value, called],
                        )
                        .await
                }),
        )
        .await?;
        client.batch_execute("COMMIT").await?;
        Ok(true)
    }
}

/// `hermes_tpl_<12 hex>`, the hash of every migration's SQL.
fn template_name() -> String {
    let mut h = Sha256::new();
    for m in migrate::MIGRATIONS {
        h.update(m.sql.as_bytes());
    }
    format!("hermes_tpl_{}", &hex::encode(h.finalize())[..12])
}

fn template_hash(template: &str) -> &str {
    template.trim_start_matches("hermes_tpl_")
}

/// The names of `template`'s clean databases start with this.
fn pool_prefix(template: &str) -> String {
    format!("hermes_pool_{}", template_hash(template))
}

/// A `LIKE` pattern matching `template`'s clean databases (and nothing else: `_` escaped).
fn pool_pattern(template: &str) -> String {
    format!("{}\\_%", pool_prefix(template).replace('_', "\\_"))
}

/// The unique tail of a test database's name (`hermes_t<12 hex>`, `hermes_scratch_<12 hex>`:
/// the 12 hex digits), which the database keeps through the pool's names.
fn suffix(name: &str) -> &str {
    &name[name.len().saturating_sub(12)..]
}

async fn exists(admin: &Client, name: &str) -> Result<bool, DbError> {
    Ok(admin
        .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
        .await?
        .is_some())
}

/// `CREATE DATABASE name TEMPLATE template`, retried while another session is on the
/// template (PostgreSQL refuses to copy it then).
async fn clone_template(admin: &Client, template: &str, name: &str) -> Result<(), DbError> {
    let sql = format!("CREATE DATABASE {name} TEMPLATE {template}");
    retried(Duration::from_millis(100), || admin.batch_execute(&sql)).await
}

/// Rename database `from` to `to`, ending the sessions still on it first (a test's fleet,
/// a pool being dropped); retried while one lingers.
async fn rename(admin: &Client, from: &str, to: &str) -> Result<(), DbError> {
    let sql = format!("ALTER DATABASE {from} RENAME TO {to}");
    retried(Duration::from_millis(20), || async {
        admin
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                  WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&from],
            )
            .await?;
        admin.batch_execute(&sql).await
    })
    .await
}

/// `attempt` until it succeeds, at most 50 times, `pause` apart: PostgreSQL refuses to copy or
/// rename a database while another session is on it, and a session just ended lingers a moment.
async fn retried<F, Fut>(pause: Duration, mut attempt: F) -> Result<(), DbError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), tokio_postgres::Error>>,
{
    let mut tries = 0;
    loop {
        match attempt().await {
            Ok(()) => return Ok(()),
            Err(e) if tries < 50 => {
                tries += 1;
                tracing::debug!(error = %e, "database busy; trying again");
                tokio::time::sleep(pause).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::server_from_env;

    /// A database claimed from the pool, what it held then, and a session on it.
    async fn claimed() -> (Server, String, Pristine, Client) {
        let server = Server::new(&server_from_env()).unwrap();
        let name = format!("hermes_scratch_{}", super::super::unique());
        let pristine = server.claim(&name).await.unwrap();
        let client = server.connect(&name).await.unwrap();
        (server, name, pristine, client)
    }

    /// A claimed database with rows of a test's own, wiped: it reads as it did when handed out.
    #[tokio::test]
    async fn a_wiped_database_holds_what_it_held_when_handed_out() {
        let (server, name, pristine, client) = claimed().await;
        let user = crate::scratch::insert_user(&Db::new(&server.url_of(&name), 1).unwrap())
            .await
            .unwrap();
        client
            .batch_execute(
                "INSERT INTO workspaces (slug, name) VALUES ('second', 'Second');
                 UPDATE workspaces SET name = 'renamed' WHERE slug = 'default';
                 DELETE FROM schema_migrations WHERE version = 1;",
            )
            .await
            .unwrap();
        assert_ne!(Pristine::read(&client).await.unwrap(), pristine, "{user}");
        assert!(pristine.restore(&client).await.unwrap());
        assert_eq!(Pristine::read(&client).await.unwrap(), pristine);
        drop(client);
        assert_eq!(
            server.release(&name, &pristine).await.unwrap(),
            Released::Pooled
        );
        // Handed on under the pool's name: whatever still knows the test's name cannot reach it.
        assert!(server.connect(&name).await.is_err());
    }

    /// A test that changed the schema does not hand its database on.
    #[tokio::test]
    async fn a_database_whose_schema_changed_is_dropped() {
        let (server, name, pristine, client) = claimed().await;
        client
            .batch_execute("CREATE TABLE probe (id int)")
            .await
            .unwrap();
        assert!(!pristine.restore(&client).await.unwrap());
        drop(client);
        assert_eq!(
            server.release(&name, &pristine).await.unwrap(),
            Released::SchemaChanged
        );
        let admin = server.admin().await.unwrap();
        assert!(!exists(&admin, &name).await.unwrap());
    }

    #[test]
    fn a_database_keeps_its_unique_tail_through_the_pool() {
        assert_eq!(suffix("hermes_t0123456789ab"), "0123456789ab");
        assert_eq!(suffix("hermes_scratch_0123456789ab"), "0123456789ab");
    }
}
