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
use hermes_types::model::{FailureCode, ModelCall, Outcome, Platform, Reply};

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
/// scrubbed: kept for operators in `error_detail`, never shown to the run's caller. `calls`
/// are the run's model calls, kept in the same statement (docs/console.md, "A run's page").
pub async fn with_outcome(
    tx: &Transaction<'_>,
    id: RunId,
    outcome: &Outcome,
    detail: Option<&str>,
    calls: &[ModelCall],
) -> Result<Closed, DbError> {
    let (closed, delegated) = finish(tx, id, outcome, detail, calls).await?;
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
    let reply = parked.payload::<Reply>().ok();
    let calls = reply.as_ref().map_or(&[][..], |r| &r.calls[..]);
    let mut client = db.get().await?;
    let tx = client.transaction().await?;
    let mut closed = with_outcome(&tx, run, &parked_outcome(), None, calls).await?;
    if !closed.closed
        && let Some((why, detail)) = delivery_sends::park_reason(&tx, parked.id).await?
    {
        let failed = fail_after_answer(&tx, run, &detail.unwrap_or(why)).await?;
        closed = refund_if(&tx, run, failed).await?;
    }
    if closed.closed
        && let Some(reply) = &reply
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
    let closed = with_outcome(&tx, parked.run_id, &parked_outcome(), None, &[]).await?;
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
    calls: &[ModelCall],
) -> Result<(bool, Option<delegations::Round>), DbError> {
    let calls = json_list(calls)?;
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
            let transcript = json_list(transcript)?;
            tx.query_opt(
                &crate::stmt(
                    tx,
                    &closing(
                        "UPDATE agent_runs SET status = 'completed', output_text = $2, model = $3,
                            tokens_in = $4, tokens_out = $5, tools_used = $6,
                            cost_micro_usd = $7, transcript = $8, model_calls = $9,
                            updated_at = now(), finished_at = now()",
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
                    &calls,
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
                            error_detail = $4, model_calls = $6, updated_at = now(),
                            finished_at = now()",
                    ),
                )
                .await?,
                &[
                    &id.as_uuid(),
                    &code.as_str(),
                    message,
                    &detail,
                    &status.as_str(),
                    &calls,
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

/// `items` as a JSON array, or NULL when there are none.
fn json_list<T: serde::Serialize>(items: &[T]) -> Result<Option<serde_json::Value>, DbError> {
    (!items.is_empty())
        .then(|| serde_json::to_value(items))
        .transpose()
        .map_err(|e| DbError::Invalid(e.to_string()))
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
mod tests;
