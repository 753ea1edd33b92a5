//! The agent MCP surface keeps no session (docs/agents.md, "Two transports"): an agent whose
//! calls land on different ingest replicas, as behind a load balancer with no sticky
//! sessions, initializes on one, lists and acknowledges on another, and answers on the first.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{eventually, telegram_texts_to};
use hermes_types::agent::EngagementMode;
use hermes_types::model::Platform;
use serde_json::json;

use crate::agent_mcp::{Mcp, TG_SECRET, assign, env_with, external_agent, key, peer, run_status};
use hermes_testkit::telegram_text;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_is_served_by_any_ingest_replica_without_a_session() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Telegram, "4545", 5).await;
    assign(&env, user.id, victor).await;
    let (_, agent_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&Service::ALL).await;
    // A second ingest of the same install: same namespace, database and Redis.
    let replica = env.start(&[Service::Ingest]).await;
    let one = Mcp::new(&fleet, &agent_key);
    let two = Mcp::new(&replica, &agent_key);

    let init = one
        .rpc("initialize", json!({"protocolVersion": "2025-06-18"}))
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    fleet
        .telegram_update(TG_SECRET, &telegram_text(4545, 5, "which replica answers?"))
        .await;
    let run_id = two.next_run().await["runId"].as_str().unwrap().to_string();
    assert_eq!(
        two.ok("inbox.ack", json!({"runId": run_id})).await["acked"],
        true
    );
    let bundle = one.ok("context.bundle", json!({"runId": run_id})).await;
    assert_eq!(bundle["runProtocol"]["runId"], run_id.as_str());
    one.ok(
        "chat.appendMessage",
        json!({"runId": run_id, "body": "Either one."}),
    )
    .await;
    assert_eq!(
        two.refused(
            "chat.appendMessage",
            json!({"runId": run_id, "body": "Either one, again."})
        )
        .await["code"],
        "RUN_ENDED",
        "the other replica sees the run answered"
    );
    eventually(Duration::from_secs(30), "the run completed", || async {
        (run_status(&env, &run_id).await == "completed").then_some(())
    })
    .await;
    assert_eq!(telegram_texts_to(&peer, "4545").await, ["Either one."]);
    replica.stop().await.unwrap();
    fleet.stop().await.unwrap();
}
