//! Tool calls that wait for an operator (docs/operator-mcp.md, approvals). The tools stage
//! records a round's waiting calls with the round itself and sets the run
//! `awaiting_approval`; operators answer each call (MCP `permissions_respond`,
//! `hermes approvals allow|deny`), or its timeout denies it. The answer that leaves no call
//! of the round waiting queues the round again, carrying every answer, in its own
//! transaction.
//!
//! **An allow comes before the deadline.** An allow answered once the call's deadline has
//! passed is refused ([`Answered::PastDeadline`]): the call is timed out there and then, as
//! the timeout sweeper would have, so a call nobody allowed in time never runs.
//!
//! **Nothing runs twice when two operators answer at once.** Every answer first locks the
//! run's row, so answers to one run are taken one after the other; a call is answered only
//! while it is `pending` (the second answer finds it decided and is told so); and the round
//! is queued by the one answer that sees no call left waiting.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hermes_types::envelope::Envelope;
use hermes_types::ids::{ApprovalId, RunId, SessionId};
use hermes_types::model::Platform;
use hermes_types::model::{ApprovalDecision, ToolCall, ToolRequest, Verdict};
use hermes_types::trace::TraceParent;
use serde_json::{Value, json};

use super::events::{self, EventKind, NewEvent};
use super::runs::RunStatus;
use super::{DbError, GenericClient, Transaction, inbox};

/// Where a call stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Pending,
    Decided(Verdict),
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Decided(v) => v.as_str(),
        }
    }

    fn parse(s: &str) -> Result<Self, DbError> {
        if s == "pending" {
            return Ok(Status::Pending);
        }
        Verdict::parse(s)
            .map(Status::Decided)
            .ok_or_else(|| DbError::Invalid(format!("unknown approval status {s:?}")))
    }
}

/// A waiting (or answered) call as stored, with where its run came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Approval {
    pub id: ApprovalId,
    pub run_id: RunId,
    pub round: i16,
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    pub status: Status,
    pub decided_by: Option<String>,
    pub reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub deadline_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
    /// The run's platform and sender, and its agent's profile key when it has one.
    pub platform: String,
    pub sender_id: String,
    pub agent: Option<String>,
}

const COLUMNS: &str = "a.id, a.run_id, a.round, a.call_id, a.tool, a.arguments, a.status, \
    a.decided_by, a.reason, a.created_at, a.deadline_at, a.decided_at, r.platform, r.sender_id, \
    g.profile_key AS agent";
const FROM: &str = "tool_approvals a JOIN agent_runs r ON r.id = a.run_id \
    LEFT JOIN agents g ON g.id = r.agent_id";

fn from_row(r: &tokio_postgres::Row) -> Result<Approval, DbError> {
    Ok(Approval {
        id: r.get("id"),
        run_id: r.get("run_id"),
        round: r.get("round"),
        call_id: r.get("call_id"),
        tool: r.get("tool"),
        arguments: r.get("arguments"),
        status: Status::parse(r.get("status"))?,
        decided_by: r.get("decided_by"),
        reason: r.get("reason"),
        created_at: r.get("created_at"),
        deadline_at: r.get("deadline_at"),
        decided_at: r.get("decided_at"),
        platform: r.get("platform"),
        sender_id: r.get("sender_id"),
        agent: r.get("agent"),
    })
}

impl Approval {
    /// How long the call waited for its answer, in seconds (`None` while it waits).
    pub fn waited_secs(&self) -> Option<f64> {
        self.decided_at
            .map(|at| (at - self.created_at).num_milliseconds().max(0) as f64 / 1000.0)
    }
}

/// Where a run's conversation is, so its approval events can be followed by platform, chat
/// and session like its messages.
struct RunPlace {
    platform: Option<Platform>,
    chat_id: Option<String>,
    session_id: Option<SessionId>,
}

impl RunPlace {
    fn of(row: &tokio_postgres::Row) -> Self {
        Self {
            platform: Platform::parse(row.get("platform")),
            chat_id: row.get("chat_id"),
            session_id: row.get("session_id"),
        }
    }

    /// Write an event of `kind` about `run_id` there.
    async fn record(
        &self,
        tx: &Transaction<'_>,
        kind: EventKind,
        run_id: RunId,
        body: Value,
    ) -> Result<(), DbError> {
        let event = NewEvent {
            platform: self.platform,
            chat_id: self.chat_id.as_deref(),
            session_id: self.session_id,
            ..NewEvent::of_run(kind, run_id, body)
        };
        events::record(tx, &event).await
    }
}

/// In the tools stage's transaction: make `calls` of `request`'s round wait for an operator
/// for at most `timeout`, set the run `awaiting_approval`, and write an `approval_requested`
/// event for each. A redelivered round records nothing twice. Returns the waiting calls.
pub async fn request(
    tx: &Transaction<'_>,
    run_id: RunId,
    request: &ToolRequest,
    calls: &[&ToolCall],
    timeout: Duration,
) -> Result<Vec<Approval>, DbError> {
    let round = i16::from(request.request.tool_round);
    let stored = serde_json::to_value(request)
        .map_err(|e| DbError::Invalid(format!("tool request: {e}")))?;
    let secs = timeout.as_secs_f64();
    let place = tx
        .query_one(
            "SELECT platform, chat_id, session_id FROM agent_runs WHERE id = $1",
            &[&run_id],
        )
        .await?;
    let place = RunPlace::of(&place);
    for call in calls {
        let inserted = tx
            .query_opt(
                "INSERT INTO tool_approvals
                   (id, run_id, round, call_id, tool, arguments, request, deadline_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8))
                 ON CONFLICT (run_id, round, call_id) DO NOTHING
                 RETURNING id, deadline_at",
                &[
                    &ApprovalId::new(),
                    &run_id,
                    &round,
                    &call.id,
                    &call.name,
                    &call.arguments,
                    &stored,
                    &secs,
                ],
            )
            .await?;
        if let Some(row) = inserted {
            let id: ApprovalId = row.get(0);
            let deadline: DateTime<Utc> = row.get(1);
            let body = json!({
                "approval_id": id, "tool": call.name, "call_id": call.id,
                "arguments": call.arguments, "deadline_at": deadline,
            });
            place
                .record(tx, EventKind::ApprovalRequested, run_id, body)
                .await?;
        }
    }
    super::runs::advance(tx, run_id, RunStatus::AwaitingApproval).await?;
    of_round(tx, run_id, request.request.tool_round).await
}

/// Every call of `run_id`'s tool round `round` that waited, answered or not.
pub async fn of_round(
    client: &impl GenericClient,
    run_id: RunId,
    round: u8,
) -> Result<Vec<Approval>, DbError> {
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM {FROM} WHERE a.run_id = $1 AND a.round = $2 ORDER BY a.created_at, a.id"
            ),
            &[&run_id, &i16::from(round)],
        )
        .await?;
    rows.iter().map(from_row).collect()
}

/// The calls waiting now, oldest first, at most `limit`.
pub async fn list_open(client: &impl GenericClient, limit: i64) -> Result<Vec<Approval>, DbError> {
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM {FROM} WHERE a.status = 'pending'
                 ORDER BY a.created_at, a.id LIMIT $1"
            ),
            &[&limit.clamp(1, 1000)],
        )
        .await?;
    rows.iter().map(from_row).collect()
}

/// One call, waiting or answered.
pub async fn get(client: &impl GenericClient, id: ApprovalId) -> Result<Option<Approval>, DbError> {
    let row = client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM {FROM} WHERE a.id = $1"),
            &[&id],
        )
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// How many calls wait, and how long the oldest has (seconds; 0 when none).
pub async fn pending_stats(client: &impl GenericClient) -> Result<(i64, f64), DbError> {
    let row = client
        .query_one(
            "SELECT count(*),
                    COALESCE(EXTRACT(EPOCH FROM now() - min(created_at))::float8, 0)
             FROM tool_approvals WHERE status = 'pending'",
            &[],
        )
        .await?;
    Ok((row.get(0), row.get(1)))
}

/// What answering a call did.
#[derive(Clone, Debug, PartialEq)]
pub enum Answered {
    /// This answer decided the call; `resumed` when it was the round's last waiting call
    /// and the round was queued again.
    Decided {
        approval: Approval,
        resumed: bool,
    },
    /// The call was answered before (by another operator or its timeout): nothing changed.
    AlreadyDecided(Approval),
    /// An allow after the call's deadline: refused, and the call timed out instead
    /// ([`Verdict::TimedOut`]); `resumed` as for [`Answered::Decided`].
    PastDeadline {
        approval: Approval,
        resumed: bool,
    },
    NotFound,
}

/// Answer call `id` with `verdict`, in the caller's transaction (see the module doc for why
/// two answers at once decide it once).
pub async fn answer(
    tx: &Transaction<'_>,
    id: ApprovalId,
    verdict: Verdict,
    by: Option<&str>,
    reason: Option<&str>,
) -> Result<Answered, DbError> {
    let Some(run) = tx
        .query_opt(
            "SELECT run_id, deadline_at <= now() FROM tool_approvals WHERE id = $1",
            &[&id],
        )
        .await?
    else {
        return Ok(Answered::NotFound);
    };
    let run_id: RunId = run.get(0);
    // Past its deadline a call may only be refused: an allow times it out instead.
    let late = verdict == Verdict::Allowed && run.get::<_, bool>(1);
    let (verdict, by, reason) = if late {
        (Verdict::TimedOut, None, Some(TIMED_OUT))
    } else {
        (verdict, by, reason)
    };
    let run = tx
        .query_one(
            "SELECT status, traceparent, platform, chat_id, session_id FROM agent_runs
             WHERE id = $1 FOR UPDATE",
            &[&run_id],
        )
        .await?;
    let run_status: String = run.get("status");
    let traceparent: Option<String> = run.get("traceparent");
    let claimed = tx
        .query_opt(
            "UPDATE tool_approvals SET status = $2, decided_by = $3, reason = $4, decided_at = now()
             WHERE id = $1 AND status = 'pending' RETURNING round",
            &[&id, &verdict.as_str(), &by, &reason],
        )
        .await?;
    let approval = get(tx, id)
        .await?
        .ok_or_else(|| DbError::NotFound(format!("approval {id} vanished")))?;
    let Some(claimed) = claimed else {
        return Ok(Answered::AlreadyDecided(approval));
    };
    let round: i16 = claimed.get(0);
    let body = json!({
        "approval_id": id, "tool": approval.tool, "call_id": approval.call_id,
        "verdict": verdict.as_str(), "by": by, "reason": reason,
    });
    RunPlace::of(&run)
        .record(tx, EventKind::ApprovalResolved, run_id, body)
        .await?;
    let resumed = run_status == RunStatus::AwaitingApproval.as_str()
        && resume_if_answered(tx, run_id, round, traceparent.as_deref()).await?;
    Ok(if late {
        Answered::PastDeadline { approval, resumed }
    } else {
        Answered::Decided { approval, resumed }
    })
}

/// Queue the round again with every answer when none of its calls waits any more. The run
/// row is locked by the caller.
async fn resume_if_answered(
    tx: &Transaction<'_>,
    run_id: RunId,
    round: i16,
    traceparent: Option<&str>,
) -> Result<bool, DbError> {
    let rows = tx
        .query(
            "SELECT call_id, status, decided_by, reason, request FROM tool_approvals
             WHERE run_id = $1 AND round = $2 ORDER BY created_at, id",
            &[&run_id, &round],
        )
        .await?;
    let mut decisions = Vec::with_capacity(rows.len());
    for r in &rows {
        match Status::parse(r.get("status"))? {
            Status::Pending => return Ok(false),
            Status::Decided(verdict) => decisions.push(ApprovalDecision {
                call_id: r.get("call_id"),
                verdict,
                by: r.get("decided_by"),
                reason: r.get("reason"),
            }),
        }
    }
    let Some(first) = rows.first() else {
        return Ok(false);
    };
    let mut request: ToolRequest = serde_json::from_value(first.get("request"))
        .map_err(|e| DbError::Invalid(format!("stored tool request of run {run_id}: {e}")))?;
    request.decisions = decisions;
    let env = Envelope::new(run_id, traceparent.and_then(TraceParent::parse), &request);
    inbox::enqueue(tx, &[env]).await?;
    super::runs::advance(tx, run_id, RunStatus::AwaitingTools).await?;
    Ok(true)
}

/// Why [`time_out`] answered a call.
const TIMED_OUT: &str = "nobody answered within the approval timeout";
const STOPPED: &str = "the run was asked to stop";

/// Time out up to `batch` calls past their deadline, each as a [`Verdict::TimedOut`] answer
/// in its own transaction; a call of a run asked to stop is denied at once, so the round
/// resumes, sees the stop and ends the run `cancelled` instead of waiting out the timeout.
/// The candidates are read without a lock (an answer locks the run first, then the call:
/// taking the call's lock here first could deadlock with it); a call answered in between,
/// by an operator or another replica, comes back [`Answered::AlreadyDecided`] and changes
/// nothing. Returns the answers made.
pub async fn time_out(db: &super::Db, batch: i64) -> Result<Vec<Answered>, DbError> {
    let due: Vec<(ApprovalId, bool)> = {
        let client = db.get().await?;
        client
            .query(
                "SELECT a.id, a.deadline_at <= now() FROM tool_approvals a
                 JOIN agent_runs r ON r.id = a.run_id
                 WHERE a.status = 'pending'
                   AND (a.deadline_at <= now() OR r.stop_requested_at IS NOT NULL)
                 ORDER BY a.deadline_at LIMIT $1",
                &[&batch.clamp(1, 1000)],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    };
    let mut done = Vec::with_capacity(due.len());
    for (id, past_deadline) in due {
        let (verdict, why) = if past_deadline {
            (Verdict::TimedOut, TIMED_OUT)
        } else {
            (Verdict::Denied, STOPPED)
        };
        let mut client = db.get().await?;
        let tx = client.transaction().await?;
        let answered = answer(&tx, id, verdict, None, Some(why)).await?;
        tx.commit().await?;
        done.push(answered);
    }
    Ok(done)
}
