//! Throw-away databases for tests and benchmarks, on the server of a given URL: a
//! benchmark's is created and migrated, and dropped (`WITH (FORCE)`) afterwards; a test's
//! comes from the pool of wiped clones of the migrated template ([`pool`]) and goes back to
//! it, also when the code using it panics. Their names (`hermes_scratch_<12 hex>`,
//! `hermes_bench_<12 hex>`) are what `scripts/test` sweeps when a run was interrupted before
//! it could drop them.

pub mod pool;

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use secrecy::SecretString;

use super::{Db, DbError, migrate};
use pool::{Pristine, Server};

/// The server tests use: `DATABASE_URL`, else the local default (the test kit's one).
pub fn server_from_env() -> SecretString {
    SecretString::from(hermes_testkit_core::pg_base())
}

/// A migrated database of its own.
pub struct ScratchDb {
    pub db: Db,
    pub url: SecretString,
    name: String,
    /// A test's database, from the pool: handed back to it, not dropped.
    pooled: Option<(Server, Pristine)>,
}

impl ScratchDb {
    /// Create and migrate `{prefix}_{12 hex}` on the server of `server`: a database no test
    /// or run has touched, as a benchmark wants. Where the tests left this build's migrated
    /// template, it is a clone of it (a fraction of a second; migrating takes seconds).
    pub async fn create(server: &SecretString, prefix: &str) -> Result<Self, DbError> {
        let name = format!("{prefix}_{}", unique());
        let server = Server::new(server)?;
        let url = server.url_of(&name);
        let db = Db::new(&url, 4)?;
        if !server.clone_if_templated(&name).await? {
            migrate::ensure_database(&db).await?;
            migrate::run(&db).await?;
        }
        Ok(Self {
            db,
            url,
            name,
            pooled: None,
        })
    }

    /// A test's database `{prefix}_{12 hex}` on the server of `server`, from the pool of
    /// clean clones of the migrated template ([`pool`]).
    pub async fn claim(server: &SecretString, prefix: &str) -> Result<Self, DbError> {
        let name = format!("{prefix}_{}", unique());
        let server = Server::new(server)?;
        let pristine = server.claim(&name).await?;
        let url = server.url_of(&name);
        Ok(Self {
            db: Db::new(&url, 4)?,
            url,
            name,
            pooled: Some((server, pristine)),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Hand a test's database back to the pool, or drop a benchmark's; whoever is still
    /// connected is cut off.
    pub async fn drop_now(self) -> Result<(), DbError> {
        if let Some((server, pristine)) = &self.pooled {
            drop(self.db);
            server.release(&self.name, pristine).await?;
            return Ok(());
        }
        let mut admin = self.db.pg_config().clone();
        admin.dbname("postgres");
        let tls = self.db.tls();
        drop(self.db);
        let (client, conn) = admin.connect(tls).await?;
        let driver = tokio::spawn(conn);
        let dropped = client
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.name
            ))
            .await;
        drop(client);
        let _ = driver.await;
        Ok(dropped?)
    }

    /// Run `body` on a fresh scratch database (on `DATABASE_URL`'s server) and drop it
    /// afterwards; a panic in `body` is resumed after the drop.
    pub async fn with<F, Fut>(body: F)
    where
        F: FnOnce(Db) -> Fut,
        Fut: Future<Output = ()>,
    {
        let scratch = Self::claim(&server_from_env(), "hermes_scratch")
            .await
            .expect("PostgreSQL reachable for tests");
        let outcome = AssertUnwindSafe(body(scratch.db.clone()))
            .catch_unwind()
            .await;
        scratch.drop_now().await.expect("scratch database dropped");
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }
}

/// 12 random hex digits, the tail of a scratch database's name.
fn unique() -> String {
    uuid::Uuid::now_v7().simple().to_string()[20..].to_string()
}

/// A bare user in the default workspace (for tests that need a row to hang memory or
/// sessions on).
pub async fn insert_user(db: &Db) -> Result<hermes_types::ids::UserId, DbError> {
    Ok(db
        .get()
        .await?
        .query_one(
            "INSERT INTO users (workspace_id, referral_code)
             SELECT id, 'ref-' || gen_random_uuid() FROM workspaces WHERE slug = 'default'
             RETURNING id",
            &[],
        )
        .await?
        .get(0))
}
