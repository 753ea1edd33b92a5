//! `/api/jobs` (docs/api.md, jobs): scheduled jobs, each belonging to the key that made it
//! (a key with the `jobs` scope sees only its own; `API_SERVER_KEY` sees every job). Any
//! ingest replica serves any request: a job lives only in PostgreSQL, and the routers'
//! schedulers run it (services/router's `scheduler`).

mod body;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use hermes_db::jobs::{self, Job, claim};
use hermes_db::runs;
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_telemetry::TenantLimit;
use hermes_types::ids::JobId;
use hermes_types::model::JobTrigger;
use serde_json::json;

use crate::rest::Caller;
use crate::{AppState, api_body};

type Answer = Result<Response, ApiError>;

/// What every `/api/jobs/{id}…` handler starts from: the state, the caller the `jobs`
/// middleware resolved, and the job id of the path (an unparsable one is the 404 of an
/// unknown job).
pub struct JobCall {
    app: AppState,
    caller: Caller,
    id: Result<JobId, ApiError>,
}

impl FromRequestParts<AppState> for JobCall {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, Response> {
        let Path(id) = Path::<String>::from_request_parts(parts, app)
            .await
            .map_err(IntoResponse::into_response)?;
        let caller = parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::unauthorized().into_response())?;
        Ok(Self {
            app: app.clone(),
            caller,
            id: id.parse().map_err(|_| body::not_found()),
        })
    }
}

impl JobCall {
    /// A call on job `id` by `caller` from elsewhere than `/api/jobs` (the console's
    /// buttons), answered exactly as the API answers it.
    pub(crate) fn new(app: AppState, caller: Caller, id: JobId) -> Self {
        Self {
            app,
            caller,
            id: Ok(id),
        }
    }
}

fn unavailable<E>(_: E) -> ApiError {
    ApiError::unavailable("cannot reach the job store right now")
}

/// The first due time of a schedule starting now.
fn first_run(job: &jobs::JobSpec) -> Result<chrono::DateTime<Utc>, ApiError> {
    job.schedule
        .first_after(Utc::now())
        .map_err(|e| ApiError::bad_request(ApiErrorCode::InvalidSchedule, e))
}

fn respond(answer: Answer) -> Response {
    answer.unwrap_or_else(|e| e.into_response())
}

/// A schedule more frequent than `HERMES_JOB_MIN_INTERVAL_SECS` is refused (and counted).
fn check_interval(
    app: &AppState,
    schedule: &hermes_types::model::Schedule,
) -> Result<(), ApiError> {
    body::check_interval(schedule, app.ctx.config.tenants.job_min_interval).inspect_err(|e| {
        if e.code == ApiErrorCode::InvalidSchedule {
            app.ctx.metrics.agents.refused(TenantLimit::JobInterval);
        }
    })
}

/// `POST /api/jobs`: a key holds at most `HERMES_JOBS_PER_KEY` jobs (the operator's are not
/// counted); past it `429 job_limit_reached`.
pub async fn create(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    respond(
        async {
            let body = api_body(app.ctx.config.ingest.max_body_bytes, body)?;
            let mut spec = body::parse(&body)?.merge(None)?;
            body::check_target(&mut spec, &caller, &app.ctx.config.models)?;
            check_interval(&app, &spec.schedule)?;
            let next = first_run(&spec)?;
            let mut client = app.ctx.db.get().await.map_err(unavailable)?;
            body::check_chat(&client, &spec).await?;
            let tx = client.transaction().await.map_err(unavailable)?;
            if let Some(key) = caller.key_id() {
                let max = app.ctx.config.tenants.jobs_per_key;
                let held = jobs::count_of_key_locked(&tx, key)
                    .await
                    .map_err(unavailable)?;
                if held >= i64::from(max) {
                    app.ctx.metrics.agents.refused(TenantLimit::JobsPerKey);
                    return Err(ApiError::new(
                        StatusCode::TOO_MANY_REQUESTS,
                        ApiErrorCode::JobLimitReached,
                        format!(
                            "this key holds {held} jobs, the most allowed (HERMES_JOBS_PER_KEY={max}): delete one first"
                        ),
                    ));
                }
            }
            let job = jobs::create(&tx, caller.key_id(), &spec, next)
                .await
                .map_err(unavailable)?;
            tx.commit().await.map_err(unavailable)?;
            tracing::info!(job_id = %job.id, "job created");
            Ok((StatusCode::CREATED, Json(body::view(&job, None))).into_response())
        }
        .await,
    )
}

/// `GET /api/jobs`
pub async fn list(
    State(app): State<AppState>,
    axum::Extension(caller): axum::Extension<Caller>,
) -> Response {
    respond(
        async {
            let client = app.ctx.db.get().await.map_err(unavailable)?;
            let all = jobs::list(&client, caller.key_id())
                .await
                .map_err(unavailable)?;
            let data: Vec<_> = all.iter().map(|j| body::view(j, None)).collect();
            Ok(Json(json!({"object": "list", "data": data})).into_response())
        }
        .await,
    )
}

/// `GET /api/jobs/{id}`: the definition and the last run.
pub async fn get(JobCall { app, caller, id }: JobCall) -> Response {
    respond(
        async {
            let id = id?;
            let client = app.ctx.db.get().await.map_err(unavailable)?;
            let job = jobs::get(&client, id, caller.key_id(), false)
                .await
                .map_err(unavailable)?
                .ok_or_else(body::not_found)?;
            let last = jobs::last_run(&client, id).await.map_err(unavailable)?;
            Ok(Json(body::view(&job, last.as_ref())).into_response())
        }
        .await,
    )
}

/// Change a job under its row lock with `change`, and answer with it.
async fn change(
    JobCall { app, caller, id }: JobCall,
    change: impl FnOnce(&mut Job) -> Result<(), ApiError>,
) -> Answer {
    let id = id?;
    let mut client = app.ctx.db.get().await.map_err(unavailable)?;
    let tx = client.transaction().await.map_err(unavailable)?;
    let mut job = jobs::get(&tx, id, caller.key_id(), true)
        .await
        .map_err(unavailable)?
        .ok_or_else(body::not_found)?;
    let target = job.spec.target.clone();
    change(&mut job)?;
    // A new chat target must be linked; an old one unlinked since stays pausable.
    if job.spec.target != target {
        body::check_chat(&tx, &job.spec).await?;
    }
    let job = jobs::save(&tx, &job).await.map_err(unavailable)?;
    tx.commit().await.map_err(unavailable)?;
    Ok(Json(body::view(&job, None)).into_response())
}

/// `PATCH /api/jobs/{id}`: the fields given are merged into the job and checked as on
/// creation. A new schedule of a running job takes effect from now.
pub async fn patch(call: JobCall, body: Result<Bytes, BytesRejection>) -> Response {
    respond(
        async {
            let body = api_body(call.app.ctx.config.ingest.max_body_bytes, body)?;
            let patch = body::parse(&body)?;
            let config = call.app.ctx.config.clone();
            let caller = call.caller.clone();
            let app = call.app.clone();
            change(call, |job| {
                let mut spec = patch.merge(Some(&job.spec))?;
                body::check_target(&mut spec, &caller, &config.models)?;
                // A schedule kept from before the limit stays; a new one must respect it.
                if spec.schedule != job.spec.schedule {
                    check_interval(&app, &spec.schedule)?;
                }
                if spec.schedule != job.spec.schedule && !job.paused {
                    job.next_run_at = Some(first_run(&spec)?);
                }
                job.spec = spec;
                Ok(())
            })
            .await
        }
        .await,
    )
}

/// `POST /api/jobs/{id}/pause`: no run until resumed.
pub async fn pause(call: JobCall) -> Response {
    respond(
        change(call, |job| {
            job.paused = true;
            job.next_run_at = None;
            Ok(())
        })
        .await,
    )
}

/// `POST /api/jobs/{id}/resume`: the next due time counts from now; the times missed
/// while paused are not run.
pub async fn resume(call: JobCall) -> Response {
    respond(
        change(call, |job| {
            if job.paused {
                job.paused = false;
                job.next_run_at = Some(first_run(&job.spec)?);
            }
            Ok(())
        })
        .await,
    )
}

/// `POST /api/jobs/{id}/run`: one run now, out of schedule (the schedule is unchanged).
/// The run is queued in the outbox with its record in one transaction: once answered, it
/// runs once. Not sooner than `HERMES_JOB_MIN_INTERVAL_SECS` after the job's last run
/// (`429 job_too_frequent` with `Retry-After`).
pub async fn run_now(JobCall { app, caller, id }: JobCall) -> Response {
    respond(
        async {
            let id = id?;
            let mut client = app.ctx.db.get().await.map_err(unavailable)?;
            let tx = client.transaction().await.map_err(unavailable)?;
            let job = jobs::get(&tx, id, caller.key_id(), false)
                .await
                .map_err(unavailable)?
                .ok_or_else(body::not_found)?;
            let since = claim::since_last_run_locked(&tx, id)
                .await
                .map_err(unavailable)?;
            if let Some(wait) = too_soon(since, app.ctx.config.tenants.job_min_interval) {
                app.ctx.metrics.agents.refused(TenantLimit::JobInterval);
                return Err(ApiError {
                    retry_after: Some(wait),
                    ..ApiError::new(
                        StatusCode::TOO_MANY_REQUESTS,
                        ApiErrorCode::JobTooFrequent,
                        format!(
                            "the job ran less than {} s ago (HERMES_JOB_MIN_INTERVAL_SECS); retry in {wait} s",
                            app.ctx.config.tenants.job_min_interval.as_secs()
                        ),
                    )
                });
            }
            let callback = claim::callback_url(&tx, &job).await.map_err(unavailable)?;
            let run = claim::RunOf {
                job: &job,
                callback_url: callback.as_deref(),
                trigger: JobTrigger::Manual,
                due_at: Utc::now(),
            };
            let run_id = claim::enqueue_run(&tx, run)
                .await
                .map_err(unavailable)?
                .ok_or_else(|| ApiError::unavailable("the run could not be queued; try again"))?;
            tx.commit().await.map_err(unavailable)?;
            app.ctx
                .metrics
                .process.jobs_runs
                .with_label_values(&[JobTrigger::Manual.as_str()])
                .inc();
            tracing::info!(job_id = %id, %run_id, "job run now");
            Ok((
                StatusCode::ACCEPTED,
                Json(json!({"job_id": id, "run_id": run_id, "status": "queued"})),
            )
                .into_response())
        }
        .await,
    )
}

/// The whole seconds to wait before a job whose last run was `since` ago may run again,
/// when that is too soon (`None`: it may run now).
fn too_soon(since: Option<std::time::Duration>, min: std::time::Duration) -> Option<u64> {
    let left = min.checked_sub(since?)?;
    (!left.is_zero()).then(|| left.as_secs_f64().ceil() as u64)
}

/// `DELETE /api/jobs/{id}`: the job goes, and its runs still open are asked to stop.
pub async fn delete(JobCall { app, caller, id }: JobCall) -> Response {
    respond(
        async {
            let id = id?;
            let mut client = app.ctx.db.get().await.map_err(unavailable)?;
            let open = jobs::delete(&mut client, id, caller.key_id())
                .await
                .map_err(unavailable)?
                .ok_or_else(body::not_found)?;
            let mut stopping = Vec::new();
            for run in open {
                // The job is gone whatever happens here; a stop that cannot be recorded
                // leaves the run to end on its own.
                match runs::request_stop(&client, run).await {
                    Ok(true) => stopping.push(run),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(%run, error = %e, "cannot ask the job's run to stop"),
                }
            }
            tracing::info!(job_id = %id, stopping = stopping.len(), "job deleted");
            Ok(Json(json!({
                "object": "hermes.job",
                "id": id,
                "deleted": true,
                "stopping_runs": stopping,
            }))
            .into_response())
        }
        .await,
    )
}
