//! The job scheduler's side of the database (docs/architecture.md, the job scheduler): claim
//! the due jobs (`FOR UPDATE SKIP LOCKED`, so replicas share them and never take one
//! twice), and queue a job's run as an outbox row in the caller's transaction, together
//! with its `job_runs` record, whose unique (job, due time) index makes a due time run once
//! whatever claimed it.

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

/// The jobs a scheduler claims at `$1`: due, not paused, not a revoked key's.
const DUE: &str = "FROM jobs j LEFT JOIN api_keys k ON k.id = j.api_key_id
    WHERE NOT j.paused AND j.next_run_at <= $1
      AND (j.api_key_id IS NULL OR k.revoked_at IS NULL)";

/// A due job, claimed, with what its run needs from its key.
#[derive(Clone, Debug)]
pub struct Due {
    pub job: Job,
    /// The owning key's callback URL (for a `callback` target).
    pub callback_url: Option<String>,
}

/// Claim up to `limit` jobs due at `now`, oldest due first, locked until the transaction
/// ends; rows another replica holds are skipped (a router holding a job's row in key-share
/// mode while it routes one of its runs does not block the claim). Jobs of a revoked key
/// are not claimed.
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

/// Move a claimed job's next due time; a job with no time to come (a cron expression
/// whose dates have passed) is paused instead.
pub async fn advance(
    tx: &Transaction<'_>,
    id: JobId,
    next_run_at: Option<DateTime<Utc>>,
) -> Result<(), DbError> {
    tx.execute(
        "UPDATE jobs SET next_run_at = $2, paused = ($2::timestamptz IS NULL) WHERE id = $1",
        &[&id.as_uuid(), &next_run_at],
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

/// Queue one run of `job` for `due_at`: its `job_runs` row and its inbound message in the
/// outbox, in the caller's transaction. `None` when that due time has run already.
pub async fn enqueue_run(
    tx: &Transaction<'_>,
    job: &Job,
    callback_url: Option<&str>,
    trigger: JobTrigger,
    due_at: DateTime<Utc>,
) -> Result<Option<RunId>, DbError> {
    let run_id = RunId::new();
    let recorded = tx
        .execute(
            "INSERT INTO job_runs (run_id, job_id, trigger, due_at) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING",
            &[
                &run_id.as_uuid(),
                &job.id.as_uuid(),
                &trigger.as_str(),
                &due_at,
            ],
        )
        .await?;
    if recorded == 0 {
        return Ok(None);
    }
    let inbound = inbound_of(job, run_id, callback_url, trigger, due_at);
    let env = Envelope::new(run_id, Some(TraceParent::generate()), &inbound);
    outbox::enqueue(tx, &[Outgoing::from_envelope(&env)]).await?;
    Ok(Some(run_id))
}

/// The message a job's run sends to the router (docs/api.md, jobs). A `chat` target is a
/// message from that chat's user, answered there and charged to the user's credits like
/// any of theirs. Otherwise it is an API-surface message of the owning key (metered to
/// its budgets, on the `[api] tier` chain), answered to the key's callback or only stored.
fn inbound_of(
    job: &Job,
    run_id: RunId,
    callback_url: Option<&str>,
    trigger: JobTrigger,
    due_at: DateTime<Utc>,
) -> Inbound {
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
        event: MessageEvent {
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
        },
        conversation,
        requested_model: None,
        callback_url: callback,
        api_key_id: job.api_key_id,
        params: Default::default(),
        stream: false,
        job: Some(JobRunOptions {
            job_id: Some(job.id),
            toolsets: spec.toolsets.clone(),
            model: spec.model.clone(),
        }),
    }
}
