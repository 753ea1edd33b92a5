//! The bodies of `/api/jobs` (docs/api.md, jobs): what `POST` and `PATCH` accept, checked
//! field by field into a [`JobSpec`], and the JSON a job is shown as.

use axum::http::StatusCode;
use hermes_db::jobs::{Job, JobRunStatus, JobSpec, LastRun};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::model::{JobTarget, Schedule};
use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use crate::rest::Caller;

/// The longest job name.
const MAX_NAME_CHARS: usize = 200;
/// The longest prompt.
const MAX_PROMPT_CHARS: usize = 32 * 1024;
/// The most toolsets a job may name.
const MAX_TOOLSETS: usize = 32;

/// A `POST` or `PATCH` body: every field optional here; `POST` needs `name`, `prompt` and
/// `schedule`. `toolsets` and `model` may be `null` in a `PATCH` to clear them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobPatch {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    prompt: Option<String>,
    /// Parsed on its own, for a clear `invalid_schedule`.
    #[serde(default)]
    schedule: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    toolsets: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "present")]
    model: Option<Option<String>>,
    /// Parsed on its own, for a clear `invalid_target`.
    #[serde(default)]
    target: Option<Value>,
}

/// A field that is present (`null` included): `Some(None)` for `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(ApiErrorCode::InvalidRequest, message)
}

/// Parse a body; a body that is not a job is `invalid_json`.
pub fn parse(body: &[u8]) -> Result<JobPatch, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(ApiErrorCode::InvalidJson, format!("body is not a job: {e}"))
    })
}

impl JobPatch {
    /// The job this body makes (over `base` for a `PATCH`, from nothing for a `POST`),
    /// with every field checked on its own. Who may use the target is [`check_target`]'s.
    pub fn merge(self, base: Option<&JobSpec>) -> Result<JobSpec, ApiError> {
        let name = match (self.name, base) {
            (Some(n), _) => n.trim().to_string(),
            (None, Some(b)) => b.name.clone(),
            (None, None) => return Err(invalid("name is required")),
        };
        if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
            return Err(invalid(format!(
                "name must be 1 to {MAX_NAME_CHARS} characters"
            )));
        }
        let prompt = match (self.prompt, base) {
            (Some(p), _) => p,
            (None, Some(b)) => b.prompt.clone(),
            (None, None) => return Err(invalid("prompt is required")),
        };
        if prompt.trim().is_empty() || prompt.chars().count() > MAX_PROMPT_CHARS {
            return Err(invalid(format!(
                "prompt must be 1 to {MAX_PROMPT_CHARS} characters, not blank"
            )));
        }
        let schedule = match (self.schedule, base) {
            (Some(v), _) => serde_json::from_value::<Schedule>(v).map_err(|e| {
                ApiError::bad_request(ApiErrorCode::InvalidSchedule, format!("schedule: {e}"))
            })?,
            (None, Some(b)) => b.schedule.clone(),
            (None, None) => {
                return Err(ApiError::bad_request(
                    ApiErrorCode::InvalidSchedule,
                    "schedule is required: {\"cron\": \"…\"} or {\"every_seconds\": N}",
                ));
            }
        };
        let toolsets = match (self.toolsets, base) {
            (Some(t), _) => t,
            (None, Some(b)) => b.toolsets.clone(),
            (None, None) => None,
        };
        if let Some(t) = &toolsets
            && (t.is_empty()
                || t.len() > MAX_TOOLSETS
                || t.iter().any(|s| s.trim().is_empty() || s.len() > 64))
        {
            return Err(invalid(format!(
                "toolsets must list 1 to {MAX_TOOLSETS} toolset names"
            )));
        }
        let model = match (self.model, base) {
            (Some(m), _) => m,
            (None, Some(b)) => b.model.clone(),
            (None, None) => None,
        };
        let target = match (self.target, base) {
            (Some(v), _) => serde_json::from_value::<JobTarget>(v).map_err(|e| {
                ApiError::bad_request(ApiErrorCode::InvalidTarget, format!("target: {e}"))
            })?,
            (None, Some(b)) => b.target.clone(),
            (None, None) => JobTarget::Stored {},
        };
        Ok(JobSpec {
            name,
            prompt,
            schedule,
            toolsets,
            model,
            target,
        })
    }
}

/// Check what only the configuration and the caller can tell: the model is one of
/// `[models]` (by key, or as `provider:model`, which is stored as its key), and the caller may use the target. A `chat` target is the operator's alone
/// (its runs are charged to that chat's user) and takes no tool or model override (the
/// user's agent decides those); a `callback` target needs the key's callback URL.
pub fn check_target(
    spec: &mut JobSpec,
    caller: &Caller,
    models: &std::collections::BTreeMap<String, hermes_config::ModelSpec>,
) -> Result<(), ApiError> {
    // `provider:model` is stored as the configured model it names.
    if let Some(model) = &spec.model
        && !models.contains_key(model)
        && let Some(key) = crate::model_choice::choose(models, model)?
    {
        spec.model = Some(key);
    }
    if let Some(model) = &spec.model
        && !models.contains_key(model)
    {
        let known: Vec<&str> = models.keys().map(String::as_str).collect();
        return Err(invalid(format!(
            "model {model:?} is not a configured model (one of: {})",
            known.join(", ")
        )));
    }
    let bad = |m: &str| {
        Err(ApiError::bad_request(
            ApiErrorCode::InvalidTarget,
            m.to_string(),
        ))
    };
    match (&spec.target, caller) {
        (JobTarget::Stored {}, _) => Ok(()),
        (JobTarget::Callback {}, Caller::Operator) => {
            bad("the operator key has no callback URL: use a key made with --callback-url")
        }
        (JobTarget::Callback {}, Caller::Key(k)) if k.callback_url.is_none() => {
            bad("this key has no callback URL (hermes api-keys set --callback-url)")
        }
        (JobTarget::Callback {}, Caller::Key(_)) => Ok(()),
        (JobTarget::Chat { .. }, Caller::Key(_)) => {
            bad("only API_SERVER_KEY may target a chat: its runs are charged to the chat's user")
        }
        (JobTarget::Chat { platform, chat_id }, Caller::Operator) => {
            if !platform.is_chat() {
                return bad("a chat target's platform is telegram, whatsapp, instagram or slack");
            }
            if chat_id.trim().is_empty() {
                return bad("a chat target needs its chat_id");
            }
            if spec.toolsets.is_some() || spec.model.is_some() {
                return bad("a chat target takes no toolsets or model: the user's agent decides");
            }
            Ok(())
        }
    }
}

/// A schedule may not run more often than `min` (`HERMES_JOB_MIN_INTERVAL_SECS`): an
/// interval shorter than it, or a cron expression with two times closer than it, is
/// `400 invalid_schedule`.
pub fn check_interval(schedule: &Schedule, min: std::time::Duration) -> Result<(), ApiError> {
    let min_secs = min.as_secs();
    let gap = schedule
        .shortest_gap(chrono::Utc::now())
        .map_err(|e| ApiError::bad_request(ApiErrorCode::InvalidSchedule, e))?;
    match gap {
        Some(gap) if gap.num_seconds() < min_secs as i64 => Err(ApiError::bad_request(
            ApiErrorCode::InvalidSchedule,
            format!(
                "the schedule runs every {} s at its most frequent; the shortest interval allowed is {min_secs} s (HERMES_JOB_MIN_INTERVAL_SECS)",
                gap.num_seconds()
            ),
        )),
        _ => Ok(()),
    }
}

/// A `chat` target must be a linked, activated chat of a user Hermes knows (in a private
/// chat the chat id is the sender's id).
pub async fn check_chat(
    client: &impl hermes_db::GenericClient,
    spec: &JobSpec,
) -> Result<(), ApiError> {
    let JobTarget::Chat { platform, chat_id } = &spec.target else {
        return Ok(());
    };
    let linked = hermes_db::users::chat_linked(client, *platform, chat_id)
        .await
        .map_err(|_| ApiError::unavailable("cannot check the chat right now"))?;
    if linked {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            ApiErrorCode::InvalidTarget,
            format!(
                "no user is linked to {} chat {chat_id:?}",
                platform.as_str()
            ),
        ))
    }
}

/// The 404 of an unknown job, or of another key's.
pub fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, ApiErrorCode::NotFound, "no such job")
}

/// A job as the API shows it, with its last run when given.
pub fn view(job: &Job, last_run: Option<&LastRun>) -> Value {
    let s = &job.spec;
    let mut v = json!({
        "object": "hermes.job",
        "id": job.id,
        "name": s.name,
        "prompt": s.prompt,
        "schedule": s.schedule,
        "toolsets": s.toolsets,
        "model": s.model,
        "target": s.target,
        "paused": job.paused,
        "next_run_at": job.next_run_at,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
    });
    if let Some(r) = last_run {
        // A failed run's text is the message its caller was told.
        let (output, error) = match r.status {
            JobRunStatus::Failed | JobRunStatus::Cancelled => (
                None,
                Some(json!({"code": r.error_code, "message": r.output})),
            ),
            _ => (r.output.clone(), None),
        };
        v["last_run"] = json!({
            "run_id": r.run_id,
            "trigger": r.trigger,
            "due_at": r.due_at,
            "status": r.status.as_str(),
            "started_at": r.started_at,
            "finished_at": r.finished_at,
            "output": output,
            "error": error,
        });
    }
    v
}
