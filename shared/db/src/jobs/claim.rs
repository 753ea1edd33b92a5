//! The job scheduler's side of the database (docs/architecture.md, the job scheduler): claim
//! the due jobs (`FOR NO KEY UPDATE SKIP LOCKED`, so replicas share them and never take one
//! twice), and queue a job's run as an outbox row in the caller's transaction, together
//! with its `job_runs` record, whose unique (job, due time) index makes a due time run once
//! whatever claimed it.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use hermes_types::envelope::Envelope;
use hermes_types::ids::{JobId, RunId};
use hermes_types::model::{
    ChatMessage, Inbound, JobRunOptions, JobTarget, JobTrigger, MessageEvent, Platform, Role,
};
use hermes_types::stage::Outgoing;
use hermes_types::trace::TraceParent;

use super::{COLUMNS, Job, job_of};
use crate::{Client, DbError, Transaction, outbox};

/// The jobs a scheduler claims at `$1`: due, not paused, and the operator's or a live key's
/// that still holds the `jobs` scope (a key that lost it stops running its jobs, as a
/// revoked one does; they run again once it has the scope back).
const DUE: &str = "FROM jobs j LEFT JOIN api_keys k ON k.id = j.api_key_id
    WHERE NOT j.paused AND j.next_run_at <= $1
      AND (j.api_key_id IS NULL OR (k.revoked_at IS NULL AND 'jobs' = ANY (k.scopes)))";

/// A due job, claimed, with what its run needs from its key.
#[derive(Clone, Debug)]
pub struct Due {
    pub job: Job,
    /// The owning key's callback URL (for a `callback` target).
    pub callback_url: Option<String>,
}

/// Claim up to `limit` jobs due at `now`, oldest due first, locked until the transaction
/// ends; rows another replica holds are skipped (a router holding a job's row in key-share
/// mode while it routes one of its runs does not block the claim). Jobs of a revoked key,
/// or of a key without the `jobs` scope, are not claimed.
pub async fn claim_due(
    tx: &Transaction<'_>,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Due>, DbError> {
    let columns: String = COLUMNS
        .split(',')
        .map(|c| format!("j.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ");
    let rows = tx
        .query(
            &format!(
                "SELECT {columns}, k.callback_url {DUE}
                 ORDER BY j.next_run_at LIMIT $2
                 FOR NO KEY UPDATE OF j SKIP LOCKED"
            ),
            &[&now, &limit],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Due {
                job: job_of(r)?,
                callback_url: r.get(12),
            })
        })
        .collect()
}

/// Move claimed jobs' next due times, in one statement; a job with no time to come (a
/// cron expression whose dates have passed) is paused instead.
pub async fn advance(
    tx: &Transaction<'_>,
    moves: &[(JobId, Option<DateTime<Utc>>)],
) -> Result<(), DbError> {
    let ids: Vec<uuid::Uuid> = moves.iter().map(|(id, _)| id.as_uuid()).collect();
    let nexts: Vec<Option<DateTime<Utc>>> = moves.iter().map(|(_, next)| *next).collect();
    tx.execute(
        "UPDATE jobs j SET next_run_at = m.next, paused = (m.next IS NULL)
         FROM UNNEST($1::uuid[], $2::timestamptz[]) AS m (id, next) WHERE j.id = m.id",
        &[&ids, &nexts],
    )
    .await?;
    Ok(())
}

/// How many jobs a scheduler would claim at `now` (due, not paused, not a revoked key's).
pub async fn count_due(client: &Client, now: DateTime<Utc>) -> Result<i64, DbError> {
    Ok(client
        .query_one(&format!("SELECT count(*) {DUE}"), &[&now])
        .await?
        .get(0))
}

/// How long ago job `id`'s latest run was queued, by the database's clock (`None`: never),
/// holding the job's row (`FOR NO KEY UPDATE`: the scheduler skips it meanwhile, a router's
/// hold does not wait) until the transaction ends, so that two runs asked for at once see
/// each other.
pub async fn since_last_run_locked(
    tx: &Transaction<'_>,
    id: JobId,
) -> Result<Option<std::time::Duration>, DbError> {
    tx.execute(
        "SELECT 1 FROM jobs WHERE id = $1 FOR NO KEY UPDATE",
        &[&id.as_uuid()],
    )
    .await?;
    let secs: Option<f64> = tx
        .query_one(
            "SELECT EXTRACT(EPOCH FROM now() - max(created_at))::float8
             FROM job_runs WHERE job_id = $1",
            &[&id.as_uuid()],
        )
        .await?
        .get(0);
    Ok(secs.map(|s| std::time::Duration::from_secs_f64(s.max(0.0))))
}

/// The owning key's callback URL (for a run queued outside the scheduler).
pub async fn callback_url(tx: &Transaction<'_>, job: &Job) -> Result<Option<String>, DbError> {
    let Some(key) = job.api_key_id else {
        return Ok(None);
    };
    Ok(tx
        .query_opt("SELECT callback_url FROM api_keys WHERE id = $1", &[&key])
        .await?
        .and_then(|r| r.get(0)))
}

/// One run of a job to queue: for which due time, and why.
pub struct RunOf<'a> {
    pub job: &'a Job,
    /// The owning key's callback URL (for a `callback` target).
    pub callback_url: Option<&'a str>,
    pub trigger: JobTrigger,
    pub due_at: DateTime<Utc>,
}

/// Queue runs, in the caller's transaction and in two statements: their `job_runs` rows,
/// then the inbound messages of those recorded as outbox rows. Returns each run's id, in
/// order, or `None` for a due time that has run already.
pub async fn enqueue_runs(
    tx: &Transaction<'_>,
    runs: &[RunOf<'_>],
) -> Result<Vec<Option<RunId>>, DbError> {
    let run_ids: Vec<RunId> = runs.iter().map(|_| RunId::new()).collect();
    let ids: Vec<uuid::Uuid> = run_ids.iter().map(RunId::as_uuid).collect();
    let jobs: Vec<uuid::Uuid> = runs.iter().map(|r| r.job.id.as_uuid()).collect();
    let triggers: Vec<&str> = runs.iter().map(|r| r.trigger.as_str()).collect();
    let dues: Vec<DateTime<Utc>> = runs.iter().map(|r| r.due_at).collect();
    let recorded: HashSet<uuid::Uuid> = tx
        .query(
            "INSERT INTO job_runs (run_id, job_id, trigger, due_at)
             SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[])
             ON CONFLICT DO NOTHING RETURNING run_id",
            &[&ids, &jobs, &triggers, &dues],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut queued = Vec::with_capacity(runs.len());
    let mut outgoing = Vec::with_capacity(recorded.len());
    for (run, run_id) in runs.iter().zip(run_ids) {
        if !recorded.contains(&run_id.as_uuid()) {
            queued.push(None);
            continue;
        }
        let inbound = inbound_of(run, run_id);
        let env = Envelope::new(run_id, Some(TraceParent::generate()), &inbound);
        outgoing.push(Outgoing::from_envelope(&env));
        queued.push(Some(run_id));
    }
    outbox::enqueue(tx, &outgoing).await?;
    Ok(queued)
}

/// Queue one run (see [`enqueue_runs`]).
pub async fn enqueue_run(tx: &Transaction<'_>, run: RunOf<'_>) -> Result<Option<RunId>, DbError> {
    Ok(enqueue_runs(tx, &[run]).await?.pop().flatten())
}

/// The message a job's run sends to the router (docs/api.md, jobs). A `chat` target is a
/// message from that chat's user, answered there and charged to the user's credits like
/// any of theirs. Otherwise it is an API-surface message of the owning key (metered to
/// its budgets, on the `[api] tier` chain), answered to the key's callback or only stored.
fn inbound_of(run: &RunOf<'_>, run_id: RunId) -> Inbound {
    let RunOf {
        job,
        callback_url,
        trigger,
        due_at,
    } = *run;
    let spec = &job.spec;
    // The run's dedupe key: one run per due time (a manual run is its own).
    let external = match trigger {
        JobTrigger::Schedule => format!("job:{}:{}", job.id, due_at.timestamp_millis()),
        JobTrigger::Manual => format!("job:{}:run:{run_id}", job.id),
    };
    let (platform, sender, chat, callback, conversation) = match &spec.target {
        JobTarget::Chat { platform, chat_id } => (
            *platform,
            chat_id.clone(),
            chat_id.clone(),
            None,
            Vec::new(),
        ),
        target => (
            Platform::Api,
            format!("job:{}", job.id),
            job.id.to_string(),
            match target {
                JobTarget::Callback {} => callback_url.map(str::to_string),
                _ => None,
            },
            vec![ChatMessage::text(Role::User, spec.prompt.clone())],
        ),
    };
    Inbound {
        conversation,
        callback_url: callback,
        api_key_id: job.api_key_id,
        job: Some(JobRunOptions {
            job_id: Some(job.id),
            toolsets: spec.toolsets.clone(),
            model: spec.model.clone(),
        }),
        ..Inbound::of(MessageEvent {
            platform,
            sender_id: sender,
            chat_id: chat,
            text: Some(spec.prompt.clone()),
            media: Vec::new(),
            external_message_id: Some(external),
            sender_name: None,
            received_at: Utc::now(),
            metadata: Some(serde_json::json!({
                "job_id": job.id,
                "trigger": trigger.as_str(),
                "due_at": due_at,
            })),
        })
    }
}
