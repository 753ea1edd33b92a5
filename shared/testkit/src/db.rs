//! Reading this test's database (it comes from the pool of clean clones of the migrated
//! template, `hermes_db::scratch::pool`).

use hermes_db::Db;

use hermes_testkit_core::pg_base;

pub(crate) fn url_with_db(dbname: &str) -> String {
    let mut u = url::Url::parse(&pg_base()).expect("DATABASE_URL is a URL");
    u.set_path(&format!("/{dbname}"));
    u.to_string()
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
