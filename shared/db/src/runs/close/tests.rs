//! Closing a run against a scratch database: refunds once, events once, calls kept.

use super::*;
use crate::runs::{self, NewRun};
use crate::scratch::{ScratchDb, insert_user};
use hermes_types::model::{FinishReason, ReplyTo, Tier};

/// Closed now and refunded.
const REFUNDED: Closed = Closed {
    closed: true,
    refunded: true,
};
/// Closed now, its credit kept (answered).
const KEPT: Closed = Closed {
    closed: true,
    refunded: false,
};

/// A routed Telegram run charged 1 credit of its user's 5.
async fn charged_run(db: &Db) -> RunId {
    let user = insert_user(db).await.unwrap();
    let mut c = db.get().await.unwrap();
    c.execute("UPDATE users SET credits = 5 WHERE id = $1", &[&user])
        .await
        .unwrap();
    let tx = c.transaction().await.unwrap();
    let id = RunId::new();
    let run = NewRun {
        id,
        platform: Platform::Telegram,
        sender_id: "7",
        chat_id: "7",
        external_message_id: None,
        tier: Tier::Free,
        input_text: Some("hello"),
        metadata: None,
        api_key_id: None,
        traceparent: None,
    };
    assert!(runs::create(&tx, &run).await.unwrap());
    credits::charge(&tx, user, id, 1).await.unwrap();
    tx.commit().await.unwrap();
    id
}

async fn close_with(db: &Db, id: RunId, outcome: &Outcome) -> Closed {
    let mut c = db.get().await.unwrap();
    let tx = c.transaction().await.unwrap();
    let closed = with_outcome(&tx, id, outcome, Some("why"), &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    closed
}

/// The run's status and how many refunds and `delivery_failed` events it has.
async fn state(db: &Db, id: RunId) -> (String, i64, i64) {
    let c = db.get().await.unwrap();
    let row = c
        .query_one(
            "SELECT status,
                (SELECT count(*) FROM credit_ledger WHERE run_id = $1 AND reason = 'refund'),
                (SELECT count(*) FROM events WHERE run_id = $1 AND kind = 'delivery_failed')
             FROM agent_runs WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

fn answer() -> Outcome {
    Outcome::Answered {
        text: "hi".into(),
        model: "mock".into(),
        usage: Default::default(),
        finish_reason: FinishReason::Stop,
        tools_used: Vec::new(),
        transcript: Vec::new(),
    }
}

fn reply_of(run: RunId) -> Envelope {
    let to = ReplyTo {
        platform: Platform::Telegram,
        chat_id: "7".into(),
        callback_url: None,
        quote: None,
        interaction: None,
    };
    Envelope::new(run, None, &Reply::failed(to, FailureCode::Invalid, "no"))
}

#[tokio::test]
async fn a_failed_run_closes_and_is_refunded_once_and_an_answered_one_is_not_refunded() {
    ScratchDb::with(|db| async move {
        let failed = charged_run(&db).await;
        let closed = close_with(&db, failed, &parked_outcome()).await;
        assert_eq!(closed, REFUNDED);
        // A second close (a redelivered reply, the sweeper) changes nothing.
        assert_eq!(close_with(&db, failed, &answer()).await, Closed::default());
        assert_eq!(
            close_with(&db, failed, &parked_outcome()).await,
            Closed::default()
        );
        assert_eq!(state(&db, failed).await, ("failed".into(), 1, 0));

        let answered = charged_run(&db).await;
        let closed = close_with(&db, answered, &answer()).await;
        assert_eq!(closed, KEPT);
        assert_eq!(state(&db, answered).await, ("completed".into(), 0, 0));
    })
    .await;
}

#[tokio::test]
async fn an_undelivered_reply_fails_its_run_once_with_its_event_even_after_an_answer() {
    ScratchDb::with(|db| async move {
        let open = charged_run(&db).await;
        let parked = reply_of(open);
        let closed = undelivered(&db, &parked, "no_sender").await.unwrap();
        assert_eq!(closed, REFUNDED);
        assert_eq!(
            undelivered(&db, &parked, "no_sender").await.unwrap(),
            Closed::default()
        );
        assert_eq!(state(&db, open).await, ("failed".into(), 1, 1));

        // Answered, then a part reported failed: the reply queued to be parked fails it.
        let answered = charged_run(&db).await;
        close_with(&db, answered, &answer()).await;
        let parked = reply_of(answered);
        assert_eq!(
            undelivered(&db, &parked, "invalid_recipient")
                .await
                .unwrap(),
            Closed::default(),
            "an answered run stays answered without a park reason"
        );
        db.get()
            .await
            .unwrap()
            .execute(
                "INSERT INTO delivery_sends (message_id, park_reason, park_detail)
                 VALUES ($1, 'invalid_recipient', 'part 2 refused')",
                &[&parked.id],
            )
            .await
            .unwrap();
        let closed = undelivered(&db, &parked, "invalid_recipient")
            .await
            .unwrap();
        assert_eq!(closed, REFUNDED);
        assert_eq!(
            undelivered(&db, &parked, "invalid_recipient")
                .await
                .unwrap(),
            Closed::default()
        );
        assert_eq!(state(&db, answered).await, ("failed".into(), 1, 1));
    })
    .await;
}

#[tokio::test]
async fn an_unwoken_run_waits_for_its_deadline_and_one_without_is_closed() {
    ScratchDb::with(|db| async move {
        let waiting = charged_run(&db).await;
        db.get()
            .await
            .unwrap()
            .execute(
                "UPDATE agent_runs SET deadline_at = now() + interval '1 hour' WHERE id = $1",
                &[&waiting],
            )
            .await
            .unwrap();
        // Only the parked message's run matters here.
        let wake = reply_of(waiting);
        assert!(matches!(
            unwoken(&db, &wake).await.unwrap(),
            Unwoken::AwaitsDeadline(_)
        ));
        assert_eq!(state(&db, waiting).await, ("routed".into(), 0, 0));

        let old = charged_run(&db).await;
        let closed = unwoken(&db, &reply_of(old)).await.unwrap();
        assert_eq!(closed, Unwoken::Closed(REFUNDED));
        assert_eq!(state(&db, old).await, ("failed".into(), 1, 0));
    })
    .await;
}

#[tokio::test]
async fn the_stuck_sweep_closes_and_refunds_each_run_once() {
    ScratchDb::with(|db| async move {
        let stuck_run = charged_run(&db).await;
        let mut c = db.get().await.unwrap();
        let tx = c.transaction().await.unwrap();
        let swept = stuck(&tx, std::time::Duration::ZERO, 100, "late")
            .await
            .unwrap();
        assert_eq!(
            swept.iter().map(|r| (r.id, r.refunded)).collect::<Vec<_>>(),
            vec![(stuck_run, true)]
        );
        assert_eq!(swept[0].chat_id.as_deref(), Some("7"));
        assert!(
            stuck(&tx, std::time::Duration::ZERO, 100, "late")
                .await
                .unwrap()
                .is_empty()
        );
        tx.commit().await.unwrap();
        assert_eq!(state(&db, stuck_run).await, ("failed".into(), 1, 0));
    })
    .await;
}

/// A run's model calls are written by the statement that closes it, answered or failed, and
/// read back as they were; a close that finds the run closed already changes none of them.
#[tokio::test]
async fn a_runs_model_calls_are_kept_with_its_close() {
    ScratchDb::with(|db| async move {
        let call = |round: u8, error: Option<FailureCode>| ModelCall {
            round,
            at: DateTime::from_timestamp_millis(1_790_000_000_000).unwrap(),
            model: "fast".into(),
            usage: hermes_types::model::Usage {
                input_tokens: 30 + u64::from(round),
                output_tokens: 9,
                cost_micro_usd: 120,
            },
            cache_hit: round == 1,
            finish_reason: error.is_none().then_some(FinishReason::ToolCalls),
            error,
            ms: 40,
        };
        let answered = charged_run(&db).await;
        let failed = charged_run(&db).await;
        let two = [call(0, None), call(1, None)];
        let one = [call(0, Some(FailureCode::ProvidersUnavailable))];
        for (id, outcome, calls) in [
            (answered, answer(), &two[..]),
            (failed, parked_outcome(), &one[..]),
        ] {
            let mut c = db.get().await.unwrap();
            let tx = c.transaction().await.unwrap();
            with_outcome(&tx, id, &outcome, None, calls).await.unwrap();
            // Closed already: the second close writes nothing.
            with_outcome(&tx, id, &outcome, None, &[]).await.unwrap();
            tx.commit().await.unwrap();
        }
        let kept = |id: RunId| {
            let db = db.clone();
            async move {
                let row = db
                    .get()
                    .await
                    .unwrap()
                    .query_one("SELECT model_calls FROM agent_runs WHERE id = $1", &[&id])
                    .await
                    .unwrap();
                serde_json::from_value::<Vec<ModelCall>>(row.get(0)).unwrap()
            }
        };
        assert_eq!(kept(answered).await, two);
        assert_eq!(kept(failed).await, one);
    })
    .await;
}
