//! Scheduled jobs (docs/api.md, jobs): their definitions as `/api/jobs` reads and writes
//! them, each scoped to the key that made it (`None`: the operator, who sees every job).
//! What the scheduler claims and sends is in [`claim`].

pub mod claim;

use chrono::{DateTime, Utc};
use hermes_types::ids::{ApiKeyId, JobId, RunId};
use hermes_types::model::{JobTarget, JobTrigger, Schedule};
use tokio_postgres::Row;

use super::{Client, DbError, GenericClient, Transaction};

/// What a job is: everything `POST /api/jobs` sets and `PATCH` may change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSpec {
    pub name: String,
    pub prompt: String,
    pub schedule: Schedule,
    /// Only tools of these toolsets are offered to its runs (`None`: every tool).
    pub toolsets: Option<Vec<String>>,
    /// A logical model of `[models]` tried before the tier's chain.
    pub model: Option<String>,
    pub target: JobTarget,
}

/// A job as stored.
#[derive(Clone, Debug)]
pub struct Job {
    pub id: JobId,
    /// The key that made it and pays for its runs (`None`: the operator).
    pub api_key_id: Option<ApiKeyId>,
    pub spec: JobSpec,
    pub paused: bool,
    /// The next due time (`None` while paused).
    pub next_run_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Where a job's latest run is: `Queued` until the router has created its run row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobRunStatus {
    Queued,
    Routed,
    Running,
    AwaitingTools,
    /// A tool call of the run waits for an operator (docs/operator-mcp.md, approvals).
    AwaitingApproval,
    Completed,
    Failed,
    Cancelled,
}

impl JobRunStatus {
    const ALL: [JobRunStatus; 8] = [
        JobRunStatus::Queued,
        JobRunStatus::Routed,
        JobRunStatus::Running,
        JobRunStatus::AwaitingTools,
        JobRunStatus::AwaitingApproval,
        JobRunStatus::Completed,
        JobRunStatus::Failed,
        JobRunStatus::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobRunStatus::Queued => "queued",
            JobRunStatus::Routed => "routed",
            JobRunStatus::Running => "running",
            JobRunStatus::AwaitingTools => "awaiting_tools",
            JobRunStatus::AwaitingApproval => "awaiting_approval",
            JobRunStatus::Completed => "completed",
            JobRunStatus::Failed => "failed",
            JobRunStatus::Cancelled => "cancelled",
        }
    }

    /// The status of an `agent_runs` row (`None`: not routed yet).
    pub fn of_run(status: Option<&str>) -> Self {
        match status {
            None => JobRunStatus::Queued,
            Some(s) => Self::ALL
                .into_iter()
                .find(|x| x.as_str() == s)
                .unwrap_or(JobRunStatus::Failed),
        }
    }
}

/// A job's latest run, as `GET /api/jobs/{id}` shows it.
#[derive(Clone, Debug)]
pub struct LastRun {
    pub run_id: RunId,
    pub trigger: JobTrigger,
    pub due_at: DateTime<Utc>,
    pub status: JobRunStatus,
    /// When the run was queued.
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub output: Option<String>,
    pub error_code: Option<String>,
}

const COLUMNS: &str = "id, api_key_id, name, prompt, schedule, toolsets, model, target, paused,
    next_run_at, created_at, updated_at";

fn job_of(r: &Row) -> Result<Job, DbError> {
    let schedule: serde_json::Value = r.get(4);
    let target: serde_json::Value = r.get(7);
    let invalid = |what: &str, e: serde_json::Error| {
        DbError::Invalid(format!(
            "job {}: stored {what} unreadable: {e}",
            r.get::<_, uuid::Uuid>(0)
        ))
    };
    Ok(Job {
        id: JobId(r.get(0)),
        api_key_id: r.get(1),
        spec: JobSpec {
            name: r.get(2),
            prompt: r.get(3),
            schedule: serde_json::from_value(schedule).map_err(|e| invalid("schedule", e))?,
            toolsets: r.get(5),
            model: r.get(6),
            target: serde_json::from_value(target).map_err(|e| invalid("target", e))?,
        },
        paused: r.get(8),
        next_run_at: r.get(9),
        created_at: r.get(10),
        updated_at: r.get(11),
    })
}

fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).expect("schedules and targets serialize infallibly")
}

/// How many jobs key `key` holds, serializing the callers of one key until the caller's
/// transaction ends (a transaction-level advisory lock), so that concurrent creations
/// cannot pass a limit together.
pub async fn count_of_key_locked(tx: &Transaction<'_>, key: ApiKeyId) -> Result<i64, DbError> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('jobs:' || $1::uuid::text, 0))",
        &[&key],
    )
    .await?;
    Ok(tx
        .query_one("SELECT count(*) FROM jobs WHERE api_key_id = $1", &[&key])
        .await?
        .get(0))
}

/// Store a new job, first due at `next_run_at`.
pub async fn create(
    client: &impl GenericClient,
    owner: Option<ApiKeyId>,
    spec: &JobSpec,
    next_run_at: DateTime<Utc>,
) -> Result<Job, DbError> {
    let row = client
        .query_one(
            &format!(
                "INSERT INTO jobs (id, api_key_id, name, prompt, schedule, toolsets, model,
                    target_kind, target, next_run_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {COLUMNS}"
            ),
            &[
                &JobId::new().as_uuid(),
                &owner,
                &spec.name,
                &spec.prompt,
                &json(&spec.schedule),
                &spec.toolsets,
                &spec.model,
                &spec.target.kind().as_str(),
                &json(&spec.target),
                &next_run_at,
            ],
        )
        .await?;
    job_of(&row)
}

/// The jobs `owner` may see (the operator: every job), oldest first.
pub async fn list(client: &Client, owner: Option<ApiKeyId>) -> Result<Vec<Job>, DbError> {
    client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM jobs WHERE $1::uuid IS NULL OR api_key_id = $1
                 ORDER BY created_at, id"
            ),
            &[&owner],
        )
        .await?
        .iter()
        .map(job_of)
        .collect()
}

/// Every job, `limit` at a time in the order they were made, after job `after` (the last of
/// the page before; job ids are UUID v7, so the primary key pages them).
pub async fn page(client: &Client, after: Option<JobId>, limit: i64) -> Result<Vec<Job>, DbError> {
    let after = after.map(|a| a.as_uuid());
    client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM jobs WHERE $1::uuid IS NULL OR id > $1
                 ORDER BY id LIMIT $2"
            ),
            &[&after, &limit.clamp(1, 1000)],
        )
        .await?
        .iter()
        .map(job_of)
        .collect()
}

/// The job `id` if `owner` may see it; `lock` holds its row until the transaction ends.
pub async fn get(
    client: &impl GenericClient,
    id: JobId,
    owner: Option<ApiKeyId>,
    lock: bool,
) -> Result<Option<Job>, DbError> {
    let sql = format!(
        "SELECT {COLUMNS} FROM jobs WHERE id = $1 AND ($2::uuid IS NULL OR api_key_id = $2){}",
        if lock { " FOR UPDATE" } else { "" }
    );
    client
        .query_opt(&sql, &[&id.as_uuid(), &owner])
        .await?
        .as_ref()
        .map(job_of)
        .transpose()
}

/// Write back a job read with [`get`] (locked) and changed.
pub async fn save(tx: &Transaction<'_>, job: &Job) -> Result<Job, DbError> {
    let row = tx
        .query_one(
            &format!(
                "UPDATE jobs SET name = $2, prompt = $3, schedule = $4, toolsets = $5, model = $6,
                    target_kind = $7, target = $8, paused = $9, next_run_at = $10,
                    updated_at = now()
                 WHERE id = $1 RETURNING {COLUMNS}"
            ),
            &[
                &job.id.as_uuid(),
                &job.spec.name,
                &job.spec.prompt,
                &json(&job.spec.schedule),
                &job.spec.toolsets,
                &job.spec.model,
                &job.spec.target.kind().as_str(),
                &json(&job.spec.target),
                &job.paused,
                &job.next_run_at,
            ],
        )
        .await?;
    job_of(&row)
}

/// Delete the job `id` if `owner` may see it. Returns its runs still open (to be asked to
/// stop), or `None` when there was no such job.
pub async fn delete(
    client: &mut Client,
    id: JobId,
    owner: Option<ApiKeyId>,
) -> Result<Option<Vec<RunId>>, DbError> {
    let tx = client.transaction().await?;
    let Some(job) = get(&tx, id, owner, true).await? else {
        return Ok(None);
    };
    // Read before the delete: the job_runs rows go with the job (the runs themselves stay).
    let open = tx
        .query(
            "SELECT r.id FROM job_runs jr JOIN agent_runs r ON r.id = jr.run_id
             WHERE jr.job_id = $1 AND r.status NOT IN ('completed', 'failed', 'cancelled', 'expired')",
            &[&job.id.as_uuid()],
        )
        .await?
        .iter()
        .map(|r| RunId(r.get(0)))
        .collect();
    tx.execute("DELETE FROM jobs WHERE id = $1", &[&job.id.as_uuid()])
        .await?;
    tx.commit().await?;
    Ok(Some(open))
}

/// The latest run of job `id`, queued or routed.
pub async fn last_run(client: &Client, id: JobId) -> Result<Option<LastRun>, DbError> {
    let row = client
        .query_opt(
            "SELECT jr.run_id, jr.trigger, jr.due_at, jr.created_at, r.status, r.finished_at,
                    r.output_text, r.error_code
             FROM job_runs jr LEFT JOIN agent_runs r ON r.id = jr.run_id
             WHERE jr.job_id = $1 ORDER BY jr.created_at DESC, jr.run_id DESC LIMIT 1",
            &[&id.as_uuid()],
        )
        .await?;
    Ok(row.as_ref().map(last_run_of))
}

/// [`last_run`] of each of `ids` that has run, in one statement (a page of jobs).
pub async fn last_runs(
    client: &Client,
    ids: &[JobId],
) -> Result<std::collections::HashMap<JobId, LastRun>, DbError> {
    let ids: Vec<uuid::Uuid> = ids.iter().map(JobId::as_uuid).collect();
    let rows = client
        .query(
            "SELECT DISTINCT ON (jr.job_id)
                    jr.run_id, jr.trigger, jr.due_at, jr.created_at, r.status, r.finished_at,
                    r.output_text, r.error_code, jr.job_id
             FROM job_runs jr LEFT JOIN agent_runs r ON r.id = jr.run_id
             WHERE jr.job_id = ANY($1)
             ORDER BY jr.job_id, jr.created_at DESC, jr.run_id DESC",
            &[&ids],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (JobId(r.get(8)), last_run_of(r)))
        .collect())
}

fn last_run_of(r: &Row) -> LastRun {
    LastRun {
        run_id: RunId(r.get(0)),
        trigger: JobTrigger::parse(r.get(1)).unwrap_or(JobTrigger::Schedule),
        due_at: r.get(2),
        started_at: r.get(3),
        status: JobRunStatus::of_run(r.get(4)),
        finished_at: r.get(5),
        output: r.get(6),
        error_code: r.get(7),
    }
}

/// Whether job `id` still exists, holding its row (`FOR KEY SHARE`) until the transaction
/// ends: a delete waits for the caller's commit, and the scheduler's claim (`FOR NO KEY
/// UPDATE`) does not.
pub async fn hold(tx: &Transaction<'_>, id: JobId) -> Result<bool, DbError> {
    Ok(tx
        .query_opt(
            "SELECT 1 FROM jobs WHERE id = $1 FOR KEY SHARE",
            &[&id.as_uuid()],
        )
        .await?
        .is_some())
}
