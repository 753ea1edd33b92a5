//! Throw-away databases for tests and benchmarks: created on the server of a given URL,
//! migrated, and dropped (`WITH (FORCE)`) afterwards, also when the code using them panics.
//! Their names (`hermes_scratch_<12 hex>`, `hermes_bench_<12 hex>`) are what `scripts/test`
//! sweeps when a run was interrupted before it could drop them.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use secrecy::{ExposeSecret, SecretString};

use super::{Db, DbError, migrate};

/// The server tests use: `DATABASE_URL`, else the local default (the test kit's one).
pub fn server_from_env() -> SecretString {
    SecretString::from(hermes_testkit_core::pg_base())
}

/// A migrated database of its own.
pub struct ScratchDb {
    pub db: Db,
    pub url: SecretString,
    name: String,
}

impl ScratchDb {
    /// Create and migrate `{prefix}_{12 hex}` on the server of `server`.
    pub async fn create(server: &SecretString, prefix: &str) -> Result<Self, DbError> {
        let id = &uuid::Uuid::now_v7().simple().to_string()[20..];
        let name = format!("{prefix}_{id}");
        let mut url = url::Url::parse(server.expose_secret())
            .map_err(|e| DbError::Refused(format!("DATABASE_URL: {e}")))?;
        url.set_path(&format!("/{name}"));
        let url = SecretString::from(url.to_string());
        let db = Db::new(&url, 4)?;
        migrate::ensure_database(&db).await?;
        migrate::run(&db).await?;
        Ok(Self { db, url, name })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Drop the database, whoever is still connected.
    pub async fn drop_now(self) -> Result<(), DbError> {
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
        let scratch = Self::create(&server_from_env(), "hermes_scratch")
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
