//! Closing a run, in one place: the AgentRun row is finished with its outcome, a run that
//! ends without an answer is refunded once (whoever closes it, however often), and a reply
//! given up on is recorded as an event for operators (docs/operator-mcp.md, "Events").
//! Delivery closes a run with its reply (docs/models-and-budgets.md, "What the model is
//! given: the routing pipeline", steps 9–10), the router's stuck-run sweeper closes the runs
//! left open (docs/operations.md, "Runs that never end"), and the parking hooks of the
//! delivery and webhooks stages close the run of a reply or a wake that could not be
//! delivered (docs/architecture.md, "4. Poison is parked, never looped"). A closed run never
//! changes again, except an answered run whose platform reported a part failed after
//! accepting it (docs/channels.md, "Statuses"): it fails, with the same refund and event.

use chrono::{DateTime, Utc};
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;
use hermes_types::model::parked::parked_outcome;
use hermes_types::model::{FailureCode, Outcome, Platform, Reply};

use super::RunStatus;
use crate::delegations;
use crate::events::{self, EventKind, NewEvent};
use crate::{Db, DbError, Transaction, credits, delivery_sends, inbox};
use hermes_types::model::delegation::Ended;

/// What closing a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Closed {
    /// This call closed the run (false: it was closed already).
    pub closed: bool,
    /// This call refunded the run's credit (false: answered, never charged, or refunded
    /// already).
    pub refunded: bool,
}

/// Close run `id` with `outcome` in the caller's transaction; a failed (or cancelled, or
/// expired) run is refunded once. `detail` (of a failure) is what went wrong, already
/// scrubbed: kept for operators in `error_detail`, never shown to the run's caller.
pub async fn with_outcome(
    tx: &Transaction<'_>,
    id: RunId,
    outcome: &Outcome,
    detail: Option<&str>,
) -> Result<Closed, DbError> {
    let (closed, delegated) = finish(tx, id, outcome, detail).await?;
    // A delegated run's end resumes its parent's round once it is the last of it; a run
    // that did not answer takes the runs it delegated down with it (docs/a2a.md,
    // "Delegating to other workspaces").
    if let Some(round) = delegated {
        delegations::resume_if_done(tx, round).await?;
    }
    if closed && matches!(outcome, Outcome::Failed { .. }) {
        delegations::stop_children(tx, &[id]).await?;
    }
    match outcome {
        Outcome::Failed { .. } => refund_if(tx, id, closed).await,
        Outcome::Answered { .. } => Ok(Closed {
            closed,
            refunded: false,
        }),
    }
}

/// Close as failed the run of `parked`, a reply that could not be delivered and was parked
/// for `reason` (`no_sender`, a permanent failure, the retry schedule used up): there is
/// nobody left to tell. A reply queued only to be parked because its platform reported a
/// part failed after accepting it fails its answered run. Either way the run is refunded
/// once and a `delivery_failed` event written with the close (docs/operator-mcp.md,
/// "Events").
pub async fn undelivered(db: &Db, parked: &Envelope, reason: &str) -> Result<Closed, DbError> {
    let run = parked.run_id;
    let mut client = db.get().await?;
    let tx = client.transaction().await?;
    let mut closed = with_outcome(&tx, run, &parked_outcome(), None).await?;
    if !closed.closed
        && let Some((why, detail)) = delivery_sends::park_reason(&tx, parked.id).await?
    {
        let failed = fail_after_answer(&tx, run, &detail.unwrap_or(why)).await?;
        closed = refund_if(&tx, run, failed).await?;
    }
    if closed.closed
        && let Ok(reply) = parked.payload::<Reply>()
    {
        let to = &reply.reply_to;
        let event = NewEvent {
            platform: Some(to.platform),
            chat_id: Some(&to.chat_id),
            ..NewEvent::of_run(
                EventKind::DeliveryFailed,
                run,
                serde_json::json!({ "reason": reason, "message_id": parked.id }),
            )
        };
        events::record(&tx, &event).await?;
    }
    tx.commit().await?;
    Ok(closed)
}

/// What became of the run of a wake that could not be delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwoken {
    /// The run waits for its external agent until this reply deadline (docs/agents.md, "When
    /// an external run ends"): the wake is only a nudge and the agent's inbox is the truth,
    /// so the agent may still pull the run; the deadline ends it if it does not.
    AwaitsDeadline(DateTime<Utc>),
    /// A run with no deadline (dispatched by an older build): closed as failed.
    Closed(Closed),
}

/// End, if it must, the run of `parked`, a wake that could not be delivered.
pub async fn unwoken(db: &Db, parked: &Envelope) -> Result<Unwoken, DbError> {
    let mut client = db.get().await?;
    if let Some(deadline) = inbox::deadline_of(&client, parked.run_id).await? {
        return Ok(Unwoken::AwaitsDeadline(deadline));
    }
    let tx = client.transaction().await?;
    let closed = with_outcome(&tx, parked.run_id, &parked_outcome(), None).await?;
    tx.commit().await?;
    Ok(Unwoken::Closed(closed))
}

/// Refund run `id` once if this call `closed` it.
async fn refund_if(tx: &Transaction<'_>, id: RunId, closed: bool) -> Result<Closed, DbError> {
    Ok(Closed {
        closed,
        refunded: closed && credits::refund(tx, id).await?,
    })
}

/// Close the run with its outcome, and record that end on its delegation when it is a
/// delegated run. Returns whether this call closed it (false: it was closed already) and the
/// round the delegation belongs to.
async fn finish(
    tx: &Transaction<'_>,
    id: RunId,
    outcome: &Outcome,
    detail: Option<&str>,
) -> Result<(bool, Option<delegations::Round>), DbError> {
    let row = match outcome {
        Outcome::Answered {
            text,
            model,
            usage,
            tools_used,
            transcript,
            ..
        } => {
            // The tool round, kept with the run so any replica can show and continue it.
            let transcript = (!transcript.is_empty())
                .then(|| serde_json::to_value(transcript))
                .transpose()
                .map_err(|e| DbError::Invalid(e.to_string()))?;
            tx.query_opt(
                &crate::stmt(
                    tx,
                    &closing(
                        "UPDATE agent_runs SET status = 'completed', output_text = $2, model = $3,
                            tokens_in = $4, tokens_out = $5, tools_used = $6,
                            cost_micro_usd = $7, transcript = $8, updated_at = now(),
                            finished_at = now()",
                    ),
                )
                .await?,
                &[
                    &id.as_uuid(),
                    text,
                    model,
                    &(usage.input_tokens as i64),
                    &(usage.output_tokens as i64),
                    tools_used,
                    &(usage.cost_micro_usd as i64),
                    &transcript,
                ],
            )
            .await?
        }
        Outcome::Failed { code, message } => {
            // A run stopped on request is closed `cancelled`, one its external agent never
            // answered `expired`, with the same code and message.
            let status = match code {
                FailureCode::Cancelled => RunStatus::Cancelled,
                FailureCode::Expired => RunStatus::Expired,
                _ => RunStatus::Failed,
            };
            tx.query_opt(
                &crate::stmt(
                    tx,
                    &closing(
                        "UPDATE agent_runs SET status = $5, error_code = $2, output_text = $3,
                            error_detail = $4, updated_at = now(), finished_at = now()",
                    ),
                )
                .await?,
                &[
                    &id.as_uuid(),
                    &code.as_str(),
                    message,
                    &detail,
                    &status.as_str(),
                ],
            )
            .await?
        }
    };
    let Some(row) = row else {
        return Ok((false, None));
    };
    // Only a delegated run (its message says so) costs the statement that records its end:
    // folding that into the close itself made every close 15 % slower (docs/a2a.md).
    if !row.get::<_, bool>(0) {
        return Ok((true, None));
    }
    let (how, text, code) = match outcome {
        Outcome::Answered { text, .. } => (Ended::Completed, text.as_str(), None),
        Outcome::Failed { code, message } => {
            let how = match code {
                FailureCode::Cancelled => Ended::Cancelled,
                FailureCode::Expired => Ended::Expired,
                _ => Ended::Failed,
            };
            (how, message.as_str(), Some(code.as_str()))
        }
    };
    let round = delegations::ended(tx, id, how, Some(text), code).await?;
    Ok((true, round))
}

/// The statement that closes a run: `update` (an `UPDATE agent_runs SET …` of run `$1`)
/// applied to an open run, answering whether the run was delegated (its message carries
/// `delegation`, as `delegate_task_async` writes it); no row when it was closed already.
fn closing(update: &str) -> String {
    format!(
        "{update}
         WHERE id = $1 AND status NOT IN ('completed', 'failed', 'cancelled', 'expired')
         RETURNING COALESCE(metadata ? 'delegation', false)"
    )
}

/// Fail run `id`, answered already, because its answer did not reach the user after all (its
/// platform reported a sent part failed, docs/channels.md, statuses): true when it was
/// `completed` and is now `failed` with `detail`, false otherwise (failed once only).
async fn fail_after_answer(tx: &Transaction<'_>, id: RunId, detail: &str) -> Result<bool, DbError> {
    let n = tx
        .execute(
            "UPDATE agent_runs SET status = 'failed', error_code = $2, error_detail = $3,
                updated_at = now()
             WHERE id = $1 AND status = 'completed'",
            &[&id.as_uuid(), &FailureCode::Invalid.as_str(), &detail],
        )
        .await?;
    Ok(n == 1)
}

/// A run the sweeper closed, with where its failure reply goes.
#[derive(Clone, Debug)]
pub struct SweptRun {
    pub id: RunId,
    pub platform: Option<Platform>,
    pub chat_id: Option<String>,
    /// Whether this sweep refunded it (false: it was never charged).
    pub refunded: bool,
}

/// Close as failed (`error_code = 'stuck'`, `message` as its output) at most `limit` runs
/// still open `older_than` after they were created, and refund each once. Rows another
/// sweeper holds are skipped, so several replicas sweep without closing a run twice.
pub async fn stuck(
    tx: &Transaction<'_>,
    older_than: std::time::Duration,
    limit: i64,
    message: &str,
) -> Result<Vec<SweptRun>, DbError> {
    let rows = tx
        .query(
            "UPDATE agent_runs SET status = 'failed', error_code = 'stuck', output_text = $3,
                 updated_at = now(), finished_at = now()
             WHERE id IN (
                 SELECT id FROM agent_runs
                 WHERE status NOT IN ('completed', 'failed', 'cancelled', 'expired')
                   AND created_at < now() - make_interval(secs => $1)
                   -- An external run is ended by its reply deadline (the expiry sweeper);
                   -- it is stuck only when still open this long after that deadline.
                   AND (deadline_at IS NULL OR deadline_at < now() - make_interval(secs => $1))
                   -- A run waiting for an operator's approval is not stuck until this long
                   -- after its call's approval deadline, and a run resumed by an answer gets
                   -- this long again from the answer (docs/operator-mcp.md, approvals).
                   AND NOT EXISTS (
                       SELECT 1 FROM tool_approvals a
                       WHERE a.run_id = agent_runs.id
                         AND COALESCE(a.decided_at, a.deadline_at)
                             > now() - make_interval(secs => $1))
                   -- Nor is a run whose round waits for the runs it delegated while one
                   -- of them is open (each ends by its own limits), or this long after
                   -- the last ended (docs/a2a.md, Delegating to other workspaces).
                   AND NOT EXISTS (
                       SELECT 1 FROM delegations d
                       WHERE d.parent_run_id = agent_runs.id
                         AND (d.finished_at > now() - make_interval(secs => $1)
                              OR (d.finished_at IS NULL
                                  AND (d.created_at > now() - make_interval(secs => $1)
                                       OR EXISTS (SELECT 1 FROM agent_runs c
                                                  WHERE c.id = d.child_run_id)))))
                 ORDER BY created_at
                 LIMIT $2
                 FOR UPDATE SKIP LOCKED)
             RETURNING id, platform, chat_id",
            &[&older_than.as_secs_f64(), &limit, &message],
        )
        .await?;
    let mut swept = Vec::with_capacity(rows.len());
    for r in &rows {
        let id = RunId::from(r.get::<_, uuid::Uuid>(0));
        if let Some(round) =
            delegations::ended(tx, id, Ended::Failed, Some(message), Some("stuck")).await?
        {
            delegations::resume_if_done(tx, round).await?;
        }
        swept.push(SweptRun {
            id,
            platform: Platform::parse(r.get(1)),
            chat_id: r.get(2),
            refunded: refund_if(tx, id, true).await?.refunded,
        });
    }
    if !swept.is_empty() {
        let ids: Vec<RunId> = swept.iter().map(|s| s.id).collect();
        delegations::stop_children(tx, &ids).await?;
    }
    Ok(swept)
}

#[cfg(test)]
mod tests {
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
        let closed = with_outcome(&tx, id, outcome, Some("why")).await.unwrap();
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
}
