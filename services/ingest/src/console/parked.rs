//! The console's parked messages (docs/console.md): how many each stage's parking queue
//! holds, the messages grouped by stage and reason, one message's envelope and failure, and
//! replay (same id, attempt 0) or purge of the ones ticked, each confirmed. Every action goes
//! through `hermes_operator::parked`, as `hermes dlq` does, so a message is never lost while
//! the page looks at it; each is written to the activity log with who did it.
//!
//! Looking means taking every message of a queue and putting identical copies back. A queue
//! holding more than [`LOOK_BOUND`] is counted but not looked through here: `hermes dlq`
//! filters it by reason and time without a page to render.

use std::collections::{BTreeMap, BTreeSet};

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use hermes_db::console_sessions::Login;
use hermes_operator::parked::{self, Parked, ParkedError, Selection};
use hermes_types::stage::Stage;
use serde::Deserialize;

use super::html::{esc, log_action, page, refusal, see_other};
use super::session::{csrf_ok, field, fields, forbidden};
use crate::AppState;

/// The most messages the page takes from the parking queues to show them.
pub const LOOK_BOUND: u32 = 1_000;

/// Messages on one page.
const PAGE: usize = 50;

/// What the list shows.
#[derive(Debug, Default, Deserialize)]
pub struct Shown {
    stage: Option<String>,
    reason: Option<String>,
    /// The last message id of the previous page.
    after: Option<String>,
    /// What the last action did (`replayed` or `purged`), and to how many.
    done: Option<String>,
    n: Option<usize>,
}

/// What a form asks of the ticked messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Replay,
    Purge,
}

impl Action {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "replay" => Some(Action::Replay),
            "purge" => Some(Action::Purge),
            _ => None,
        }
    }

    fn done(self) -> &'static str {
        match self {
            Action::Replay => "replayed",
            Action::Purge => "purged",
        }
    }

    /// The activity log's kind.
    fn kind(self) -> &'static str {
        match self {
            Action::Replay => "parked_replayed",
            Action::Purge => "parked_purged",
        }
    }
}

fn stage(s: Option<&str>) -> Option<Stage> {
    Stage::ALL.into_iter().find(|st| Some(st.as_str()) == s)
}

fn broker_down(login: &Login) -> Response {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Unavailable",
        Some(login),
        "<p class=\"error\">RabbitMQ did not answer; nothing was taken. Reload shortly.</p>",
    )
}

/// `GET /console/parked`
pub async fn list(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Query(q): Query<Shown>,
) -> Response {
    let bus = &app.ctx.bus;
    let Ok(depths) = parked::depths(bus).await else {
        return broker_down(&login);
    };
    let chosen = stage(q.stage.as_deref());
    let mut body = String::new();
    if let (Some(done), Some(n)) = (q.done.as_deref(), q.n)
        && matches!(done, "replayed" | "purged")
    {
        body.push_str(&format!(
            "<p class=\"completed\" role=\"status\">{} {n} message(s).</p>",
            if done == "replayed" {
                "Replayed"
            } else {
                "Purged"
            }
        ));
    }
    body.push_str(&depth_table(&depths, chosen));
    let in_view: u32 = depths
        .iter()
        .filter(|(s, _)| chosen.is_none_or(|c| c == *s))
        .map(|(_, n)| n)
        .sum();
    if in_view == 0 {
        body.push_str("<p>Nothing is parked here.</p>");
        return page(StatusCode::OK, "Parked messages", Some(&login), &body);
    }
    if in_view > LOOK_BOUND {
        body.push_str(&format!(
            "<p>{in_view} messages: too many to look through here (at most {LOOK_BOUND}). Choose one stage, or use <code>hermes dlq list --queue &lt;stage&gt; --reason &lt;reason&gt;</code>.</p>"
        ));
        return page(StatusCode::OK, "Parked messages", Some(&login), &body);
    }
    let selection = Selection {
        stages: chosen.into_iter().collect(),
        ..Selection::default()
    };
    let Ok(all) = parked::list(bus, &selection).await else {
        return broker_down(&login);
    };
    body.push_str(&reason_table(&all));
    let shown: Vec<&Parked> = all
        .iter()
        .filter(|p| q.reason.as_deref().is_none_or(|r| p.reason == r))
        .collect();
    let start = q
        .after
        .as_deref()
        .and_then(|a| shown.iter().position(|p| p.id == a).map(|i| i + 1))
        .unwrap_or(0);
    let this_page = &shown[start.min(shown.len())..(start + PAGE).min(shown.len())];
    body.push_str(&messages_form(this_page, &login));
    if start + PAGE < shown.len()
        && let Some(last) = this_page.last()
    {
        let mut next = url::form_urlencoded::Serializer::new(String::new());
        if let Some(s) = chosen {
            next.append_pair("stage", s.as_str());
        }
        if let Some(r) = &q.reason {
            next.append_pair("reason", r);
        }
        next.append_pair("after", &last.id);
        body.push_str(&format!(
            "<p><a href=\"/console/parked?{}\">More parked messages</a></p>",
            esc(&next.finish())
        ));
    }
    page(StatusCode::OK, "Parked messages", Some(&login), &body)
}

/// Each stage's parking queue and its depth, linked to its list.
fn depth_table(depths: &[(Stage, u32)], chosen: Option<Stage>) -> String {
    let mut out = String::from(
        "<table><caption>Parking queues</caption><thead><tr><th scope=\"col\">Stage</th>\
         <th scope=\"col\">Messages</th></tr></thead><tbody>",
    );
    for (s, n) in depths {
        let current = if chosen == Some(*s) {
            " aria-current=\"page\""
        } else {
            ""
        };
        out.push_str(&format!(
            "<tr><td><a href=\"/console/parked?stage={s}\"{current}>{s}</a></td><td>{n}</td></tr>",
            s = s.as_str()
        ));
    }
    out.push_str("</tbody></table><p><a href=\"/console/parked\">Every stage</a></p>");
    out
}

/// How many are parked per stage and reason, each linked to its list.
fn reason_table(all: &[Parked]) -> String {
    let mut counts: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for p in all {
        *counts.entry((p.stage.as_str(), &p.reason)).or_default() += 1;
    }
    let mut out = String::from(
        "<table><caption>By stage and reason</caption><thead><tr><th scope=\"col\">Stage</th>\
         <th scope=\"col\">Reason</th><th scope=\"col\">Messages</th></tr></thead><tbody>",
    );
    for ((s, r), n) in counts {
        let link = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("stage", s)
            .append_pair("reason", r)
            .finish();
        out.push_str(&format!(
            "<tr><td>{s}</td><td><a href=\"/console/parked?{}\">{}</a></td><td>{n}</td></tr>",
            esc(&link),
            esc(r)
        ));
    }
    out.push_str("</tbody></table>");
    out
}

/// The page's messages, each with a box to tick, and the two confirmed actions.
fn messages_form(shown: &[&Parked], login: &Login) -> String {
    let now = Utc::now();
    let mut out = format!(
        "<form method=\"post\" action=\"/console/parked\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <table><caption>Messages</caption><thead><tr><th scope=\"col\">Select</th>\
         <th scope=\"col\">Message</th><th scope=\"col\">Kind</th><th scope=\"col\">Run</th>\
         <th scope=\"col\">Stage</th><th scope=\"col\">Reason</th><th scope=\"col\">Detail</th>\
         <th scope=\"col\">Parked</th></tr></thead><tbody>",
        esc(&login.csrf)
    );
    for p in shown {
        let run = if p.run == "-" {
            "-".to_string()
        } else {
            format!("<a href=\"/console/runs/{r}\">{r}</a>", r = esc(&p.run))
        };
        let age = p
            .parked_at
            .map(|t| format!("{}s ago", (now - t).num_seconds().max(0)))
            .unwrap_or_else(|| "-".into());
        out.push_str(&format!(
            "<tr><td><input type=\"checkbox\" name=\"id\" value=\"{stage}/{id}\" id=\"m-{id}\" aria-label=\"Select {id}\"></td>\
             <td><a href=\"/console/parked/{stage}/{id}\">{id}</a></td><td>{kind}</td><td>{run}</td>\
             <td>{stage}</td><td>{reason}</td><td>{detail}</td><td>{age}</td></tr>",
            stage = p.stage.as_str(),
            id = esc(&p.id),
            kind = esc(&p.kind),
            reason = esc(&p.reason),
            detail = esc(p.detail.as_deref().unwrap_or("")),
        ));
    }
    out.push_str(&format!("</tbody></table>{}</form>", confirm_buttons()));
    out
}

/// The confirmation box and the two buttons every action form ends with.
fn confirm_buttons() -> String {
    "<p><input type=\"checkbox\" id=\"confirm\" name=\"confirm\" value=\"yes\" required> \
     <label for=\"confirm\" class=\"inline\">Act on the selected messages: a replay sends each \
     to its stage again; a purge deletes it for good</label></p>\
     <button type=\"submit\" name=\"action\" value=\"replay\">Replay selected</button> \
     <button type=\"submit\" name=\"action\" value=\"purge\">Purge selected</button>"
        .to_string()
}

/// `GET /console/parked/{stage}/{id}`: one message, its failure and its envelope.
pub async fn show(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Path((stage_name, id)): Path<(String, String)>,
) -> Response {
    let back = "/console/parked";
    let Some(stage) = stage(Some(&stage_name)) else {
        return refusal(
            StatusCode::NOT_FOUND,
            "Not found",
            &login,
            "No such stage.",
            back,
        );
    };
    let selection = Selection {
        stages: vec![stage],
        ids: Some(BTreeSet::from([id.clone()])),
        ..Selection::default()
    };
    let Ok(found) = parked::list(&app.ctx.bus, &selection).await else {
        return broker_down(&login);
    };
    let Some(p) = found.first() else {
        return refusal(
            StatusCode::NOT_FOUND,
            "Not found",
            &login,
            "No such parked message: it may have been replayed or purged.",
            back,
        );
    };
    let envelope = serde_json::to_string_pretty(&p.envelope_json()).unwrap_or_default();
    let run = if p.run == "-" {
        "-".to_string()
    } else {
        format!("<a href=\"/console/runs/{r}\">{r}</a>", r = esc(&p.run))
    };
    let body = format!(
        "<dl><dt>Stage</dt><dd>{stage}</dd><dt>Queue</dt><dd>{queue}</dd><dt>Kind</dt><dd>{kind}</dd>\
         <dt>Run</dt><dd>{run}</dd><dt>Attempt</dt><dd>{attempt}</dd><dt>Reason</dt><dd>{reason}</dd>\
         <dt>Detail</dt><dd>{detail}</dd><dt>Parked at</dt><dd>{at}</dd></dl>\
         <h2>Envelope</h2><pre>{envelope}</pre>\
         <form method=\"post\" action=\"/console/parked\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <input type=\"hidden\" name=\"id\" value=\"{stage}/{id}\">{buttons}</form>",
        stage = stage.as_str(),
        queue = esc(&p.queue),
        kind = esc(&p.kind),
        attempt = p.attempt,
        reason = esc(&p.reason),
        detail = esc(p.detail.as_deref().unwrap_or("")),
        at = p
            .parked_at
            .map(|t| t.to_rfc3339())
            .unwrap_or_else(|| "-".into()),
        envelope = esc(&envelope),
        csrf = esc(&login.csrf),
        id = esc(&p.id),
        buttons = confirm_buttons(),
    );
    page(
        StatusCode::OK,
        &format!("Parked message {}", p.id),
        Some(&login),
        &body,
    )
}

/// `POST /console/parked`: replay or purge the ticked messages (`id` = `<stage>/<id>`,
/// repeated), with the login's CSRF token and the confirmation.
pub async fn act(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    body: Bytes,
) -> Response {
    if !csrf_ok(&login, field(&body, "csrf").as_deref()) {
        return forbidden(Some(&login));
    }
    let refused = |status, why: &str| refusal(status, "Not done", &login, why, "/console/parked");
    let Some(action) = field(&body, "action").as_deref().and_then(Action::parse) else {
        return refused(StatusCode::BAD_REQUEST, "Choose replay or purge.");
    };
    if field(&body, "confirm").as_deref() != Some("yes") {
        return refused(
            StatusCode::BAD_REQUEST,
            "Tick the confirmation to act on parked messages.",
        );
    }
    let mut stages: Vec<Stage> = Vec::new();
    let mut ids = BTreeSet::new();
    for ticked in fields(&body, "id")
        .into_iter()
        .take(LOOK_BOUND as usize + 1)
    {
        let Some((s, id)) = ticked.split_once('/') else {
            return refused(
                StatusCode::BAD_REQUEST,
                "A selected message is not one of the list's.",
            );
        };
        let Some(s) = stage(Some(s)) else {
            return refused(
                StatusCode::BAD_REQUEST,
                "A selected message names no stage.",
            );
        };
        if !stages.contains(&s) {
            stages.push(s);
        }
        ids.insert(id.to_string());
    }
    if ids.is_empty() {
        return refused(StatusCode::BAD_REQUEST, "Select at least one message.");
    }
    if ids.len() > LOOK_BOUND as usize {
        return refused(
            StatusCode::BAD_REQUEST,
            "Too many messages selected at once.",
        );
    }
    let selection = Selection {
        stages: Stage::ALL
            .into_iter()
            .filter(|s| stages.contains(s))
            .collect(),
        ids: Some(ids.clone()),
        ..Selection::default()
    };
    let bus = &app.ctx.bus;
    let outcome = match action {
        Action::Replay => parked::replay(bus, &selection, &mut |_, _| {}).await,
        Action::Purge => parked::purge(bus, &selection).await,
    };
    let by = super::approvals::answered_by(&login);
    let n = match outcome {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(%by, action = action.kind(), error = %e, "a parked-message action from the console stopped");
            let done = match &e {
                ParkedError::Stopped { done, .. } => *done,
                _ => 0,
            };
            log_done(&app, action, &by, &ids, done).await;
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("Stopped after {done}: {e}. What was not done is still parked."),
            );
        }
    };
    tracing::info!(%by, action = action.kind(), messages = n, "parked messages acted on from the console");
    log_done(&app, action, &by, &ids, n).await;
    let to_stage = match stages.as_slice() {
        [s] => format!("stage={}&", s.as_str()),
        _ => String::new(),
    };
    see_other(&format!(
        "/console/parked?{to_stage}done={}&n={n}",
        action.done()
    ))
}

async fn log_done(app: &AppState, action: Action, by: &str, ids: &BTreeSet<String>, n: usize) {
    log_action(
        app,
        action.kind(),
        serde_json::json!({ "by": by, "ids": ids, "messages": n, "from": "console" }),
    )
    .await;
}
