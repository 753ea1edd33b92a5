//! An external agent's streamed answer over the MCP surface (docs/agents.md, "Drafts"): the
//! deltas reach a REST caller's `GET /v1/runs/{id}/events` while the run is open, and
//! finalizing answers the run exactly once with the text so far; a draft the agent gives up
//! on is replaced in the chat by the failure message.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{count, eventually, telegram_texts_to};
use hermes_types::agent::EngagementMode;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent_mcp::{Mcp, TG_SECRET, assign, env_with, external_agent, key, peer, run_status};
use hermes_testkit::telegram_text;
use hermes_types::model::Platform;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_streams_to_a_rest_caller_and_finalizing_answers_once() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Discuss).await;
    let (rest_key_id, rest_key) = key(&env, None).await;
    let user = env.key_user(rest_key_id, "customer-1", 5).await;
    assign(&env, user.id, victor).await;
    let (_, agent_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&Service::ALL).await;
    let mcp = Mcp::new(&fleet, &agent_key);
    let http = reqwest::Client::new();

    let run_id = fleet
        .rest_message(&rest_key, "customer-1", "tell me a story")
        .await;
    let listed = mcp.next_run().await;
    assert_eq!(listed["runId"], run_id.as_str());
    mcp.ok("inbox.ack", json!({"runId": run_id})).await;

    let draft = mcp.ok("chat.startDraft", json!({"runId": run_id})).await;
    let draft_id = draft["draftId"].as_str().unwrap().to_string();
    for (i, delta) in ["Once upon", " a time."].into_iter().enumerate() {
        let chunk = mcp
            .ok(
                "chat.appendDraftChunk",
                json!({"runId": run_id, "draftId": draft_id, "delta": delta}),
            )
            .await;
        assert_eq!(chunk["chunks"], i + 1);
        assert_eq!(chunk["streamed"], true);
    }
    // The REST caller sees the deltas before the run ends: read its events until both.
    let events_url = fleet.url(&format!("/v1/runs/{run_id}/events"));
    let mut resp = http
        .get(&events_url)
        .bearer_auth(&rest_key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !(seen.contains("Once upon") && seen.contains(" a time.")) {
        let chunk = tokio::time::timeout_at(deadline, resp.chunk())
            .await
            .expect("the deltas arrive")
            .unwrap()
            .expect("the stream stays open until the run ends");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("event: message.delta"), "{seen}");
    assert!(
        !seen.contains("run.completed"),
        "the run is still open: {seen}"
    );
    drop(resp);

    // Finalizing without a body answers with the text so far, once.
    let done = mcp
        .ok(
            "chat.finalizeDraft",
            json!({"runId": run_id, "draftId": draft_id}),
        )
        .await;
    assert_eq!(done["status"], "answered");
    let twice = mcp
        .refused(
            "chat.finalizeDraft",
            json!({"runId": run_id, "draftId": draft_id}),
        )
        .await;
    assert_eq!(twice["code"], "RUN_ENDED");
    let more = mcp
        .refused(
            "chat.appendDraftChunk",
            json!({"runId": run_id, "draftId": draft_id, "delta": "!"}),
        )
        .await;
    assert_eq!(more["code"], "RUN_ENDED");
    let run: Value = eventually(Duration::from_secs(30), "the run completed", || async {
        let run: Value = http
            .get(fleet.url(&format!("/v1/runs/{run_id}")))
            .bearer_auth(&rest_key)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        (run["status"] == "completed").then_some(run)
    })
    .await;
    assert_eq!(run["output"], "Once upon a time.", "{run}");
    let whole = http
        .get(&events_url)
        .bearer_auth(&rest_key)
        .send()
        .await
        .unwrap();
    let whole = whole.text().await.unwrap();
    assert_eq!(
        whole.matches("Once upon").count(),
        2,
        "a delta and the final answer: {whole}"
    );
    let c = env.db().get().await.unwrap();
    let finalized = count(
        &env.db(),
        "SELECT count(*) FROM agent_drafts WHERE finalized_at IS NOT NULL AND body = 'Once upon a time.'",
        &[],
    )
    .await;
    assert_eq!(finalized, 1);
    // A REST run is never shown as a Telegram draft: nothing for delivery to edit.
    let updates = count(
        &env.db(),
        "SELECT count(*) FROM outbox WHERE convert_from(body, 'UTF8') LIKE '%\"kind\":\"draft_update\"%'",
        &[],
    )
    .await;
    assert_eq!(updates, 0);
    drop(c);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shown_draft_the_agent_gives_up_on_is_replaced_by_the_failure_message() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Telegram, "4343", 5).await;
    assign(&env, user.id, victor).await;
    let (_, agent_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&Service::ALL).await;
    let mcp = Mcp::new(&fleet, &agent_key);

    fleet
        .telegram_update(TG_SECRET, &telegram_text(4343, 3, "summarise my week"))
        .await;
    let run_id = mcp.next_run().await["runId"].as_str().unwrap().to_string();
    let draft = mcp.ok("chat.startDraft", json!({"runId": run_id})).await;
    let draft_id = draft["draftId"].as_str().unwrap().to_string();
    mcp.ok(
        "chat.appendDraftChunk",
        json!({"runId": run_id, "draftId": draft_id, "delta": "Your week: Mon"}),
    )
    .await;
    eventually(Duration::from_secs(30), "the draft shown", || async {
        let sent = telegram_texts_to(&peer, "4343").await;
        (sent == ["Your week: Mon"]).then_some(())
    })
    .await;
    mcp.ok(
        "runs.fail",
        json!({"runId": run_id, "reason": "calendar unreachable"}),
    )
    .await;
    eventually(Duration::from_secs(30), "the run failed", || async {
        (run_status(&env, &run_id).await == "failed").then_some(())
    })
    .await;
    let edits: Vec<String> = peer
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path().ends_with("/editMessageText"))
        .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect();
    assert_eq!(edits.len(), 1, "{edits:?}");
    assert!(
        edits[0].starts_with("Sorry, the agent could not answer"),
        "{edits:?}"
    );
    assert_eq!(
        telegram_texts_to(&peer, "4343").await,
        ["Your week: Mon"],
        "the failure replaced the draft, no second message"
    );
    fleet.stop().await.unwrap();
}
