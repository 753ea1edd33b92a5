//! The console's jobs (docs/console.md): every scheduled job, in the order they were made,
//! paged, with its schedule, target, state and latest run; and pause, resume and run now.
//! Each button goes through the same handler as `/api/jobs/{id}/pause|resume|run`, as the
//! operator, so the rules are the API's (a run now refused within
//! `HERMES_JOB_MIN_INTERVAL_SECS` of the last, say); each change is written to the activity
//! log with who made it.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use hermes_db::console_sessions::Login;
use hermes_db::jobs;
use hermes_types::ids::JobId;
use serde::Deserialize;

use super::html::{esc, log_action, page, refusal, see_other, unavailable};
use super::session::{csrf_ok, field, forbidden};
use crate::AppState;
use crate::jobs::JobCall;
use crate::rest::Caller;

/// Jobs on one page.
const PAGE: i64 = 50;

/// What a job's button asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Pause,
    Resume,
    RunNow,
}

impl Action {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "pause" => Some(Action::Pause),
            "resume" => Some(Action::Resume),
            "run" => Some(Action::RunNow),
            _ => None,
        }
    }

    /// The activity log's kind.
    fn kind(self) -> &'static str {
        match self {
            Action::Pause => "job_paused",
            Action::Resume => "job_resumed",
            Action::RunNow => "job_run_now",
        }
    }
}

/// The list's position.
#[derive(Debug, Default, Deserialize)]
pub struct Cursor {
    after: Option<String>,
}

/// `GET /console/jobs`
pub async fn list(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Query(c): Query<Cursor>,
) -> Response {
    let after = c.after.as_deref().and_then(|a| a.parse::<JobId>().ok());
    let read = async {
        let client = app.ctx.db.get().await?;
        let mut page = jobs::page(&client, after, PAGE).await?;
        // The page's latest runs in one statement, not one per job.
        let ids: Vec<JobId> = page.iter().map(|j| j.id).collect();
        let mut last = jobs::last_runs(&client, &ids).await?;
        let shown: Vec<_> = page
            .drain(..)
            .map(|job| {
                let run = last.remove(&job.id);
                (job, run)
            })
            .collect();
        Ok::<_, hermes_db::DbError>(shown)
    }
    .await;
    let Ok(shown) = read else {
        return unavailable(Some(&login), "jobs");
    };
    let mut body = String::from(
        "<p class=\"muted\">Scheduled jobs, oldest first. A paused job does not run until resumed; run now queues one run out of schedule.</p>",
    );
    if shown.is_empty() {
        body.push_str("<p>No job.</p>");
    } else {
        body.push_str(
            "<table><caption>Jobs</caption><thead><tr><th scope=\"col\">Name</th>\
             <th scope=\"col\">Schedule</th><th scope=\"col\">Target</th><th scope=\"col\">State</th>\
             <th scope=\"col\">Latest run</th><th scope=\"col\">Act</th></tr></thead><tbody>",
        );
        for (job, last) in &shown {
            body.push_str(&row(job, last.as_ref(), &login));
        }
        body.push_str("</tbody></table>");
    }
    if shown.len() == PAGE as usize
        && let Some((last, _)) = shown.last()
    {
        body.push_str(&format!(
            "<p><a href=\"/console/jobs?after={}\">Older jobs</a></p>",
            last.id
        ));
    }
    page(StatusCode::OK, "Jobs", Some(&login), &body)
}

/// One job's row, every string escaped.
fn row(job: &jobs::Job, last: Option<&jobs::LastRun>, login: &Login) -> String {
    let schedule = serde_json::to_string(&job.spec.schedule).unwrap_or_default();
    let target = serde_json::to_string(&job.spec.target).unwrap_or_default();
    let state = match (job.paused, job.next_run_at) {
        (true, _) => "paused".to_string(),
        (false, Some(next)) => format!("next at {}", next.to_rfc3339()),
        (false, None) => "active".to_string(),
    };
    let latest = match last {
        Some(r) => format!(
            "<a href=\"/console/runs/{run}\">{status}</a> ({trigger})",
            run = r.run_id,
            status = r.status.as_str(),
            trigger = r.trigger.as_str(),
        ),
        None => "none yet".into(),
    };
    let toggle = if job.paused {
        ("resume", "Resume")
    } else {
        ("pause", "Pause")
    };
    format!(
        "<tr><td>{name}</td><td><code>{schedule}</code></td><td><code>{target}</code></td>\
         <td>{state}</td><td>{latest}</td><td>\
         <form method=\"post\" action=\"/console/jobs/{id}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <button type=\"submit\" name=\"action\" value=\"{action}\" aria-label=\"{label} {name}\">{label}</button> \
         <button type=\"submit\" name=\"action\" value=\"run\" aria-label=\"Run {name} now\">Run now</button>\
         </form></td></tr>",
        name = esc(&job.spec.name),
        schedule = esc(&schedule),
        target = esc(&target),
        id = job.id,
        csrf = esc(&login.csrf),
        action = toggle.0,
        label = toggle.1,
    )
}

/// `POST /console/jobs/{id}`: pause, resume or run now, with the login's CSRF token.
pub async fn act(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if !csrf_ok(&login, field(&body, "csrf").as_deref()) {
        return forbidden(Some(&login));
    }
    let refused = |status, why: &str| refusal(status, "Not done", &login, why, "/console/jobs");
    let Ok(id) = id.parse::<JobId>() else {
        return refused(StatusCode::NOT_FOUND, "No such job.");
    };
    let Some(action) = field(&body, "action").as_deref().and_then(Action::parse) else {
        return refused(StatusCode::BAD_REQUEST, "Choose pause, resume or run now.");
    };
    // The console acts as the operator, who may act on every job.
    let call = JobCall::new(app.clone(), Caller::Operator, id);
    let answer = match action {
        Action::Pause => crate::jobs::pause(call).await,
        Action::Resume => crate::jobs::resume(call).await,
        Action::RunNow => crate::jobs::run_now(call).await,
    };
    let status = answer.status();
    if !status.is_success() {
        let why = error_message(answer).await;
        return refused(status, &why);
    }
    let by = super::approvals::answered_by(&login);
    tracing::info!(job_id = %id, action = action.kind(), %by, "job changed from the console");
    log_action(
        &app,
        action.kind(),
        serde_json::json!({ "by": by, "job_id": id, "from": "console" }),
    )
    .await;
    see_other("/console/jobs")
}

/// The message of an API error answer (`{"error": {"message"}}`), bounded.
async fn error_message(answer: Response) -> String {
    let bytes = axum::body::to_bytes(answer.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
        .unwrap_or_else(|| "The job store did not answer; try again shortly.".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_three_actions_are_read() {
        assert_eq!(Action::parse("pause"), Some(Action::Pause));
        assert_eq!(Action::parse("resume"), Some(Action::Resume));
        assert_eq!(Action::parse("run"), Some(Action::RunNow));
        assert_eq!(Action::parse("delete"), None);
        assert_eq!(Action::RunNow.kind(), "job_run_now");
    }
}
