//! The console's approvals (docs/console.md): the tool calls waiting for an operator, oldest
//! first, each with its tool, arguments, run and deadline, and an allow and a deny button.
//! An answer goes through `hermes_db::approvals::answer`, as the operator MCP server's
//! `permissions_respond` does: it decides a call exactly once however many operators answer,
//! records who answered in the event log, and resumes the run's round when it was the last.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use hermes_db::approvals::{self, Answered};
use hermes_db::console_sessions::Login;
use hermes_operator::Caller;
use hermes_types::ids::ApprovalId;
use hermes_types::model::Verdict;

use super::html::{esc, page, refusal, see_other, unavailable};
use super::session::{csrf_ok, field, forbidden};
use crate::AppState;

/// Open calls on the page.
const PAGE: i64 = 100;
/// The longest reason kept with an answer: `permissions_respond`'s.
const MAX_REASON: usize = hermes_operator::tools::permissions::MAX_REASON;

/// Who answers, named as the operator MCP server names its callers.
pub(super) fn answered_by(login: &Login) -> String {
    match login.api_key_id {
        None => Caller::OperatorKey.name(),
        Some(id) => Caller::Key { id }.name(),
    }
}

/// `GET /console/approvals`
pub async fn list(State(app): State<AppState>, Extension(login): Extension<Login>) -> Response {
    let open = async {
        let client = app.ctx.db.get().await?;
        approvals::list_open(&client, PAGE).await
    }
    .await;
    let Ok(open) = open else {
        return unavailable(Some(&login), "approvals");
    };
    let mut body = String::from(
        "<p class=\"muted\">Tool calls waiting for an operator, oldest first. A call not answered by its deadline is denied.</p>",
    );
    if open.is_empty() {
        body.push_str("<p>No call is waiting.</p>");
    }
    for a in &open {
        let arguments = serde_json::to_string_pretty(&a.arguments).unwrap_or_default();
        body.push_str(&format!(
            "<section aria-labelledby=\"a-{id}\"><h2 id=\"a-{id}\">{tool}</h2>\
             <dl><dt>Run</dt><dd><a href=\"/console/runs/{run}\">{run}</a></dd>\
             <dt>Platform</dt><dd>{platform}</dd><dt>Sender</dt><dd>{sender}</dd>\
             <dt>Agent</dt><dd>{agent}</dd><dt>Asked</dt><dd>{asked}</dd><dt>Deadline</dt><dd>{deadline}</dd></dl>\
             <pre>{arguments}</pre>\
             <form method=\"post\" action=\"/console/approvals/{id}\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <label for=\"r-{id}\">Reason (shown to the model with a denial)</label>\
             <input id=\"r-{id}\" name=\"reason\" maxlength=\"{MAX_REASON}\">\
             <button type=\"submit\" name=\"decision\" value=\"allow\">Allow</button> \
             <button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button></form></section>",
            id = a.id,
            tool = esc(&a.tool),
            run = a.run_id,
            platform = esc(&a.platform),
            sender = esc(&a.sender_id),
            agent = esc(a.agent.as_deref().unwrap_or("(none)")),
            asked = a.created_at.to_rfc3339(),
            deadline = a.deadline_at.to_rfc3339(),
            arguments = esc(&arguments),
            csrf = esc(&login.csrf),
        ));
    }
    page(StatusCode::OK, "Approvals", Some(&login), &body)
}

/// `POST /console/approvals/{id}`: allow or deny one call, with the login's CSRF token.
pub async fn answer(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if !csrf_ok(&login, field(&body, "csrf").as_deref()) {
        return forbidden(Some(&login));
    }
    let refused =
        |status, why: &str| refusal(status, "Not answered", &login, why, "/console/approvals");
    let Ok(id) = id.parse::<ApprovalId>() else {
        return refused(StatusCode::NOT_FOUND, "No such approval.");
    };
    let verdict = match field(&body, "decision").as_deref() {
        Some("allow") => Verdict::Allowed,
        Some("deny") => Verdict::Denied,
        _ => return refused(StatusCode::BAD_REQUEST, "Choose allow or deny."),
    };
    let reason = field(&body, "reason")
        .map(|r| r.trim().chars().take(MAX_REASON).collect::<String>())
        .filter(|r| !r.is_empty());
    let by = answered_by(&login);
    let answered = async {
        let mut client = app.ctx.db.get().await?;
        let tx = client
            .transaction()
            .await
            .map_err(hermes_db::DbError::from)?;
        let answered = approvals::answer(&tx, id, verdict, Some(&by), reason.as_deref()).await?;
        tx.commit().await.map_err(hermes_db::DbError::from)?;
        Ok::<_, hermes_db::DbError>(answered)
    }
    .await;
    match answered {
        Ok(Answered::Decided { .. }) => {
            tracing::info!(approval = %id, verdict = verdict.as_str(), by = %by, "approval answered from the console");
            see_other("/console/approvals")
        }
        Ok(Answered::AlreadyDecided(a)) => refused(
            StatusCode::CONFLICT,
            &format!("Already answered: {}.", a.status.as_str()),
        ),
        Ok(Answered::PastDeadline { approval, .. }) => refused(
            StatusCode::CONFLICT,
            &format!(
                "Its deadline passed at {}: it was denied as timed out.",
                approval.deadline_at.to_rfc3339()
            ),
        ),
        Ok(Answered::NotFound) => refused(StatusCode::NOT_FOUND, "No such approval."),
        Err(_) => refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "Cannot record the answer right now; try again shortly.",
        ),
    }
}
