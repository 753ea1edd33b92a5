//! Budgets of API callers and of the platform's own calls (docs/models-and-budgets.md): a
//! memory extraction is metered against the user whose exchange it reads.

use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys;
use hermes_testkit::{TestEnv, eventually, metric};
use serde_json::json;

use crate::tenants::final_run;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_extraction_is_metered_against_the_user() {
    let env = TestEnv::new().await;
    let db = env.db();
    let client = db.get().await.unwrap();
    let key = api_keys::create(&client, "shop", None, None).await.unwrap();
    let user = env.key_user(key.key.id, "alice", 10).await;
    let fleet = env.start(&Service::ALL).await;
    let http = reqwest::Client::new();
    let sent: serde_json::Value = http
        .post(fleet.url("/v1/messages"))
        .bearer_auth(&key.secret_key)
        .json(&json!({"sender_id": "alice", "text": "I am vegetarian and I live in Lisbon"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let url = fleet.url(&format!("/v1/runs/{}", sent["run_id"].as_str().unwrap()));
    let run = final_run(&http, &url, &key.secret_key).await;
    let answer_tokens = run["usage"]["total_tokens"].as_i64().unwrap();
    eventually(Duration::from_secs(20), "the memory extraction", || async {
        let text = fleet.metrics().await;
        ["saved", "none", "failed"]
            .iter()
            .any(|o| {
                metric(
                    &text,
                    &format!("hermes_memory_extractions_total{{outcome=\"{o}\"}}"),
                )
                .is_some_and(|n| n > 0.0)
            })
            .then_some(())
    })
    .await;
    let used: i64 = eventually(Duration::from_secs(10), "the usage row", || async {
        let c = db.get().await.ok()?;
        let row = c
            .query_opt(
                "SELECT used FROM llm_token_usage WHERE user_id = $1 AND window_kind = 'day'",
                &[&user.id],
            )
            .await
            .ok()??;
        Some(row.get(0))
    })
    .await;
    assert!(
        used > answer_tokens,
        "the extraction's tokens were not counted against the user: {used} used, the answer alone took {answer_tokens}"
    );
    fleet.stop().await.unwrap();
}
