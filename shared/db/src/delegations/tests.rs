//! Delegations against a scratch database: a round resumes once, when its last run closes,
//! with every result; stops reach the runs a run delegated; the sweeper waits for them.

use std::time::Duration;

use hermes_types::model::{
    FailureCode, FinishReason, LlmRequest, Outcome, Platform, ReplyTo, Tier, ToolCall, Usage,
};
use serde_json::{Value, json};

use super::*;
use crate::runs::{self, NewRun, close};
use crate::scratch::ScratchDb;
use crate::{Db, workspaces};

async fn workspace(db: &Db, slug: &str) -> WorkspaceId {
    let c = db.get().await.unwrap();
    let w = workspaces::create(
        &c,
        &workspaces::NewWorkspace {
            slug,
            name: slug,
            key: None,
            signing_secret_sealed: None,
            daily_tokens: None,
            daily_micro_usd: None,
            orchestrator: false,
        },
    )
    .await
    .unwrap();
    w.id
}

/// An open API run.
async fn run(db: &Db) -> RunId {
    open_run(db, None).await
}

/// An open run as the router makes a delegated one: its message says it is delegated.
async fn delegated_run(db: &Db) -> RunId {
    open_run(db, Some(&json!({"delegation": {"parent_run": "p"}}))).await
}

async fn open_run(db: &Db, metadata: Option<&Value>) -> RunId {
    let id = RunId::new();
    let mut c = db.get().await.unwrap();
    let tx = c.transaction().await.unwrap();
    let chat = id.to_string();
    let new = NewRun {
        id,
        platform: Platform::Api,
        sender_id: "delegation",
        chat_id: &chat,
        external_message_id: None,
        tier: Tier::Free,
        input_text: Some("task"),
        metadata,
        api_key_id: None,
        traceparent: None,
    };
    assert!(runs::create(&tx, &new).await.unwrap());
    tx.commit().await.unwrap();
    id
}

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: json!({}),
        signature: None,
    }
}

/// A round of `parent` with two delegation calls and one other call, held, its two runs
/// linked (and created, as the router would).
async fn held_round(db: &Db, parent: RunId, ws: WorkspaceId) -> (RunId, RunId) {
    let to = ReplyTo::chat(Platform::Api, parent.to_string());
    let request = ToolRequest {
        request: LlmRequest::new(to, Tier::Free, Vec::new(), Vec::new()),
        calls: vec![
            call("a", delegation::TOOL_NAME),
            call("b", delegation::TOOL_NAME),
            call("c", "current_time"),
        ],
        decisions: Vec::new(),
        results: vec![ToolResult {
            call_id: "c".into(),
            text: "noon".into(),
        }],
    };
    let (a, b) = (delegated_run(db).await, delegated_run(db).await);
    let mut c = db.get().await.unwrap();
    let tx = c.transaction().await.unwrap();
    assert!(hold(&tx, parent, &request).await.unwrap());
    assert!(!hold(&tx, parent, &request).await.unwrap(), "held once");
    for (child, call_id) in [(a, "a"), (b, "b")] {
        let d = NewDelegation {
            child,
            parent,
            call_id,
            workspace: ws,
            depth: 1,
            task: "do it",
        };
        link(&tx, 0, &d).await.unwrap();
    }
    tx.commit().await.unwrap();
    (a, b)
}

fn answered(text: &str) -> Outcome {
    Outcome::Answered {
        text: text.into(),
        model: "m".into(),
        usage: Usage::default(),
        finish_reason: FinishReason::Stop,
        tools_used: Vec::new(),
        transcript: Vec::new(),
    }
}

async fn close_with(db: &Db, id: RunId, outcome: &Outcome) -> bool {
    let mut c = db.get().await.unwrap();
    let tx = c.transaction().await.unwrap();
    let closed = close::with_outcome(&tx, id, outcome, None, &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    closed.closed
}

/// The tool requests queued for `run` (its resumed rounds).
async fn resumed(db: &Db, run: RunId) -> Vec<ToolRequest> {
    let c = db.get().await.unwrap();
    let rows = c
        .query(
            "SELECT body FROM outbox WHERE stage = 'tools' ORDER BY id",
            &[],
        )
        .await
        .unwrap();
    rows.iter()
        .map(|r| Envelope::from_slice(&r.get::<_, Vec<u8>>(0)).unwrap())
        .filter(|e| e.run_id == run)
        .map(|e| e.payload::<ToolRequest>().unwrap())
        .collect()
}

async fn stop_asked(db: &Db, id: RunId) -> bool {
    let c = db.get().await.unwrap();
    c.query_one(
        "SELECT stop_requested_at IS NOT NULL FROM agent_runs WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn a_round_resumes_once_when_its_last_run_ends_with_every_result() {
    ScratchDb::with(|db| async move {
        let ws = workspace(&db, "writers").await;
        let parent = run(&db).await;
        let (a, b) = held_round(&db, parent, ws).await;
        assert_eq!(depth_of(&db.get().await.unwrap(), a).await.unwrap(), 1);
        let (up, down) = links(&db.get().await.unwrap(), parent).await.unwrap();
        assert!(up.is_none());
        let runs: Vec<RunId> = down.iter().map(|l| l.run).collect();
        assert_eq!(runs, [a, b]);
        assert_eq!(
            (down[0].workspace.as_str(), down[0].status.as_str()),
            ("writers", "running")
        );
        let (up, down) = links(&db.get().await.unwrap(), a).await.unwrap();
        assert_eq!(up.map(|l| l.run), Some(parent));
        assert!(down.is_empty());
        assert_eq!(depth_of(&db.get().await.unwrap(), parent).await.unwrap(), 0);

        assert!(close_with(&db, a, &answered("release notes")).await);
        assert!(resumed(&db, parent).await.is_empty(), "b is still open");
        let failed = Outcome::Failed {
            code: FailureCode::Cancelled,
            message: "stopped".into(),
        };
        assert!(close_with(&db, b, &failed).await);
        assert!(!close_with(&db, b, &failed).await, "closed once");

        let rounds = resumed(&db, parent).await;
        assert_eq!(rounds.len(), 1, "resumed once");
        let round = &rounds[0];
        assert_eq!(
            round.result_of("c"),
            Some("noon"),
            "the other call kept its result"
        );
        let a_result: Value = serde_json::from_str(round.result_of("a").unwrap()).unwrap();
        assert_eq!(a_result["status"], "completed");
        assert_eq!(a_result["answer"], "release notes");
        assert_eq!(a_result["workspace"], "writers");
        assert_eq!(a_result["task_id"], a.to_string());
        let b_result: Value = serde_json::from_str(round.result_of("b").unwrap()).unwrap();
        assert_eq!(b_result["status"], "cancelled");
        assert_eq!(b_result["error"]["code"], "cancelled");
    })
    .await;
}

#[tokio::test]
async fn a_stop_reaches_every_run_delegated_below_and_a_late_one_inherits_it() {
    ScratchDb::with(|db| async move {
        let ws = workspace(&db, "research").await;
        let parent = run(&db).await;
        let (a, b) = held_round(&db, parent, ws).await;
        // `a` delegated in turn.
        let (grand, _) = held_round(&db, a, ws).await;
        assert!(
            runs::request_stop(&db.get().await.unwrap(), parent)
                .await
                .unwrap()
        );
        for id in [parent, a, b, grand] {
            assert!(stop_asked(&db, id).await, "{id} asked to stop");
        }

        // A child queued before the stop reached nobody, routed after it: stopped at once.
        let other = run(&db).await;
        let late = delegated_run(&db).await;
        let mut c = db.get().await.unwrap();
        let tx = c.transaction().await.unwrap();
        let d = NewDelegation {
            child: late,
            parent,
            call_id: "c",
            workspace: ws,
            depth: 1,
            task: "late",
        };
        link(&tx, 0, &d).await.unwrap();
        assert!(inherit_stop(&tx, late).await.unwrap());
        assert!(
            !inherit_stop(&tx, other).await.unwrap(),
            "no delegation: left alone"
        );
        tx.commit().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_parent_that_fails_takes_its_runs_down_and_the_sweeper_waits_for_open_ones() {
    ScratchDb::with(|db| async move {
        let ws = workspace(&db, "ops").await;
        let parent = run(&db).await;
        let (a, _b) = held_round(&db, parent, ws).await;
        // Everything is older than a zero-second threshold: only the delegations keep the
        // parent from being swept while its runs are open.
        let c = db.get().await.unwrap();
        c.execute(
            "UPDATE agent_runs SET created_at = now() - interval '1 hour' WHERE id = $1",
            &[&parent],
        )
        .await
        .unwrap();
        c.execute(
            "UPDATE delegations SET created_at = now() - interval '1 hour'",
            &[],
        )
        .await
        .unwrap();
        drop(c);
        let sweep = |db: Db| async move {
            let mut c = db.get().await.unwrap();
            let tx = c.transaction().await.unwrap();
            let swept = close::stuck(&tx, Duration::from_secs(1800), 10, "stuck")
                .await
                .unwrap();
            tx.commit().await.unwrap();
            swept.iter().map(|s| s.id).collect::<Vec<_>>()
        };
        assert!(
            !sweep(db.clone()).await.contains(&parent),
            "its runs are open"
        );

        let failed = Outcome::Failed {
            code: FailureCode::ProvidersUnavailable,
            message: "no".into(),
        };
        assert!(close_with(&db, parent, &failed).await);
        assert!(
            stop_asked(&db, a).await,
            "the parent's failure stops its runs"
        );
    })
    .await;
}
