//! This test's database: a clone of a migrated template, made and dropped through the
//! server's `postgres` database.

use std::str::FromStr;
use std::time::Duration;

use hermes_db::{Db, migrate};
use secrecy::SecretString;
use sha2::{Digest, Sha256};
use tokio_postgres::NoTls;

use hermes_testkit_core::pg_base;

pub(crate) fn pg_config(dbname: &str) -> tokio_postgres::Config {
    let mut c = tokio_postgres::Config::from_str(&pg_base()).expect("DATABASE_URL parses");
    c.dbname(dbname);
    c
}

pub(crate) fn url_with_db(dbname: &str) -> String {
    let mut u = url::Url::parse(&pg_base()).expect("DATABASE_URL is a URL");
    u.set_path(&format!("/{dbname}"));
    u.to_string()
}

pub(crate) async fn admin_exec(sql: &str) -> Result<(), tokio_postgres::Error> {
    let (client, conn) = pg_config("postgres").connect(NoTls).await?;
    let driver = tokio::spawn(conn);
    let r = client.batch_execute(sql).await;
    drop(client);
    let _ = driver.await;
    r
}

/// The migrated template database, named after the migrations it holds (created once;
/// concurrent test processes serialize on an advisory lock).
pub(crate) async fn template() -> String {
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

/// The llm requests the router queued in this test's outbox (memory extractions left out),
/// oldest first, as their JSON payloads.
pub async fn queued_llm_requests(db: &Db) -> Vec<serde_json::Value> {
    let c = db.get().await.unwrap();
    c.query(
        "SELECT body FROM outbox WHERE stage = 'llm' ORDER BY id",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| serde_json::from_slice::<serde_json::Value>(r.get::<_, &[u8]>(0)).unwrap())
    // Delivery also queues memory extraction on the llm stage.
    .filter(|e| e["kind"] == "llm_request")
    .map(|e| e["payload"].clone())
    .collect()
}

/// A run as the router leaves it (routed, text "hello", free tier) from `chat` on
/// `platform`, created in `tx` so the caller can charge or age it in the same transaction.
pub async fn routed_run(
    tx: &hermes_db::Transaction<'_>,
    platform: hermes_types::model::Platform,
    chat: &str,
) -> hermes_types::ids::RunId {
    let run = hermes_types::ids::RunId::new();
    let created = hermes_db::runs::create(
        tx,
        &hermes_db::runs::NewRun {
            id: run,
            platform,
            sender_id: chat,
            chat_id: chat,
            external_message_id: None,
            tier: hermes_types::model::Tier::Free,
            input_text: Some("hello"),
            metadata: None,
            api_key_id: None,
            traceparent: None,
        },
    )
    .await
    .expect("the run is created");
    assert!(created, "a new run id");
    run
}
