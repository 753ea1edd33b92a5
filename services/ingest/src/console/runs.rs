//! The console's runs (docs/console.md): the newest first, filtered by status, platform, a
//! chat, a user, an agent and a time range, paged with a cursor; a run id goes
//! straight to its page. A run's page
//! reads as its history, oldest first, as Temporal's does a workflow's: what came in, how it
//! was routed, what the model and the tools did, what was sent, how it ended.

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use hermes_db::console_sessions::Login;
use hermes_db::runs::RunStatus;
use hermes_db::runs::search::{Listed, RunSearch};
use hermes_db::{runs, users};
use hermes_types::ids::AgentId;
use hermes_types::model::Platform;
use serde::Deserialize;

use super::html::{esc, page, see_other, unavailable};
use super::users::Wanted;
use super::{history, tool_calls};
use crate::AppState;

/// Runs on one page.
const PAGE: i64 = 50;
/// The longest filter value read.
const MAX_FILTER: usize = 200;

/// The list's filters, as the form sends them.
#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    q: Option<String>,
    status: Option<String>,
    platform: Option<String>,
    /// A user id, or `platform:sender` of a chat platform.
    user: Option<String>,
    /// An agent id.
    agent: Option<String>,
    /// Runs that started at or after this time (UTC; `2026-11-29T08:00` or RFC 3339).
    since: Option<String>,
    /// Runs that started before this time.
    until: Option<String>,
    before: Option<String>,
}

/// A time the form sends: a `datetime-local` value (read as UTC) or RFC 3339.
fn time(v: Option<&str>) -> Option<DateTime<Utc>> {
    let v = v?;
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Some(t.with_timezone(&Utc));
    }
    ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(v, f).ok())
        .map(|t| t.and_utc())
}

/// A field of the form: its label, its input, and what it holds now.
fn input(name: &str, label: &str, kind: &str, value: Option<&str>, hint: &str) -> String {
    format!(
        "<div><label for=\"{name}\">{label}</label><input id=\"{name}\" name=\"{name}\" \
         type=\"{kind}\" value=\"{}\" maxlength=\"{MAX_FILTER}\" placeholder=\"{hint}\"></div>",
        esc(value.unwrap_or_default())
    )
}

/// A page position: the last row's id. Run ids are UUID v7, so they sort by creation time
/// and the primary key pages the newest first with no index of its own.
fn encode_cursor(id: uuid::Uuid) -> String {
    URL_SAFE_NO_PAD.encode(id.as_bytes())
}

fn decode_cursor(s: &str) -> Option<uuid::Uuid> {
    uuid::Uuid::from_slice(&URL_SAFE_NO_PAD.decode(s).ok()?).ok()
}

/// A filter value: trimmed, bounded, and `None` when empty.
fn filter(v: &Option<String>) -> Option<&str> {
    v.as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.len() <= MAX_FILTER)
}

fn select(name: &str, label: &str, options: &[&str], chosen: Option<&str>) -> String {
    let mut out = format!(
        "<div><label for=\"{name}\">{label}</label><select id=\"{name}\" name=\"{name}\"><option value=\"\">any</option>"
    );
    for o in options {
        let selected = if chosen == Some(*o) { " selected" } else { "" };
        out.push_str(&format!("<option{selected}>{}</option>", esc(o)));
    }
    out.push_str("</select></div>");
    out
}

/// `GET /console/runs`
pub async fn list(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Query(f): Query<Filters>,
) -> Response {
    let q = filter(&f.q);
    // A run id goes straight to the run.
    if let Some(id) = q.and_then(|q| q.parse::<uuid::Uuid>().ok()) {
        return see_other(&format!("/console/runs/{id}"));
    }
    let status = filter(&f.status)
        .and_then(RunStatus::parse)
        .map(RunStatus::as_str);
    let platform = filter(&f.platform).and_then(Platform::parse);
    let before = filter(&f.before).and_then(decode_cursor);
    let (agent, since, until) = (
        filter(&f.agent).and_then(|a| a.parse::<AgentId>().ok()),
        time(filter(&f.since)),
        time(filter(&f.until)),
    );
    let Ok(client) = app.ctx.db.get().await else {
        return unavailable(Some(&login), "runs");
    };
    // A user named by a chat sender is looked up through their linked channel.
    let user = match filter(&f.user).and_then(super::users::wanted) {
        Some(Wanted::User(id)) => Some(id),
        Some(Wanted::Sender(platform, sender)) => {
            match users::of_chat_sender(&client, platform, &sender).await {
                Ok(found) => found,
                Err(_) => return unavailable(Some(&login), "runs"),
            }
        }
        None => None,
    };
    let unknown_user = filter(&f.user).is_some() && user.is_none();
    let search = RunSearch {
        status,
        platform,
        chat: q,
        user,
        agent,
        since,
        until,
        before,
        limit: PAGE + 1,
    };
    let rows = if unknown_user {
        Ok(Vec::new())
    } else {
        runs::search::search(&client, &search).await
    };
    let Ok(rows) = rows else {
        return unavailable(Some(&login), "runs");
    };
    let more = rows.len() as i64 > PAGE;
    let shown = &rows[..rows.len().min(PAGE as usize)];
    let platforms: Vec<&str> = Platform::ALL.iter().map(|p| p.as_str()).collect();
    let mut body = format!(
        "<form class=\"filters\" method=\"get\" action=\"/console/runs\" role=\"search\">\
         <div><label for=\"q\">Run id or chat</label>\
         <input id=\"q\" name=\"q\" value=\"{}\" maxlength=\"{MAX_FILTER}\"></div>{}{}{}{}{}{}\
         <button type=\"submit\">Search</button></form>",
        esc(q.unwrap_or_default()),
        select(
            "status",
            "Status",
            &RunStatus::ALL.map(RunStatus::as_str),
            status
        ),
        select(
            "platform",
            "Platform",
            &platforms,
            platform.map(Platform::as_str)
        ),
        input("user", "User", "text", filter(&f.user), "id or telegram:42"),
        input("agent", "Agent id", "text", filter(&f.agent), ""),
        input(
            "since",
            "From (UTC)",
            "datetime-local",
            filter(&f.since),
            ""
        ),
        input(
            "until",
            "Until (UTC)",
            "datetime-local",
            filter(&f.until),
            ""
        ),
    );
    if unknown_user {
        body.push_str(
            "<p class=\"error\" role=\"alert\">No user is named so: give a user id, or a chat platform and sender as telegram:42.</p>",
        );
    }
    body.push_str(
        "<table><caption class=\"muted\">Newest first</caption><thead><tr><th>Started</th><th>Run</th>\
         <th class=\"wide\">Platform</th><th>Status</th><th class=\"wide\">Model</th><th class=\"wide\">Tokens</th>\
         <th class=\"wide\">Cost (USD)</th></tr></thead><tbody>",
    );
    for r in shown {
        body.push_str(&row_html(r));
    }
    body.push_str("</tbody></table>");
    if shown.is_empty() {
        body.push_str("<p class=\"muted\">No run matches.</p>");
    }
    if let (true, Some(last)) = (more, shown.last()) {
        let mut next = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("q", q),
            ("status", status),
            ("platform", platform.map(Platform::as_str)),
            ("user", filter(&f.user)),
            ("agent", filter(&f.agent)),
            ("since", filter(&f.since)),
            ("until", filter(&f.until)),
        ] {
            if let Some(v) = v {
                next.append_pair(k, v);
            }
        }
        next.append_pair("before", &encode_cursor(last.id));
        body.push_str(&format!(
            "<p><a href=\"/console/runs?{}\">Older runs</a></p>",
            esc(&next.finish())
        ));
    }
    page(StatusCode::OK, "Runs", Some(&login), &body)
}

/// Micro-dollars as dollars, to the micro-dollar.
pub(super) fn dollars(micro: i64) -> String {
    format!("{}.{:06}", micro / 1_000_000, (micro % 1_000_000).abs())
}

fn row_html(r: &Listed) -> String {
    format!(
        "<tr><td>{}</td><td><a href=\"/console/runs/{id}\">{id}</a></td><td class=\"wide\">{}</td>\
         <td class=\"{s}\">{s}</td><td class=\"wide\">{}</td><td class=\"wide\">{}</td><td class=\"wide\">{}</td></tr>",
        r.created_at.format("%Y-%m-%d %H:%M:%S"),
        esc(r.platform.as_deref().unwrap_or_default()),
        esc(r.model.as_deref().unwrap_or_default()),
        r.tokens,
        dollars(r.cost_micro_usd),
        id = r.id,
        s = esc(&r.status),
    )
}

/// `GET /console/runs/{id}`
pub async fn show(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Path(id): Path<String>,
) -> Response {
    let Ok(id) = id.parse::<uuid::Uuid>() else {
        return not_found(&login, &id);
    };
    let Ok(client) = app.ctx.db.get().await else {
        return unavailable(Some(&login), "runs");
    };
    let run = client
        .query_opt(
            "SELECT platform, sender_id, chat_id, status, tier, model, tokens_in, tokens_out,
                    cost_micro_usd, input_text, output_text, error_code, error_detail,
                    created_at, finished_at, traceparent, session_id, transcript
             FROM agent_runs WHERE id = $1",
            &[&id],
        )
        .await;
    let run = match run {
        Ok(Some(run)) => run,
        Ok(None) => return not_found(&login, &id.to_string()),
        Err(_) => return unavailable(Some(&login), "runs"),
    };
    let started: DateTime<Utc> = run.get(13);
    let until = run
        .get::<_, Option<DateTime<Utc>>>(14)
        .unwrap_or_else(Utc::now)
        + chrono::TimeDelta::hours(1);
    let history = client
        .query(
            // The operators' event log has no index by run: it is read within the run's
            // lifetime, by its time index.
            "SELECT created_at, kind, data::text FROM activity_events WHERE run_id = $1
             UNION ALL
             SELECT created_at, kind, body::text FROM events
             WHERE run_id = $1 AND created_at >= $2 AND created_at <= $3
             ORDER BY 1 LIMIT 500",
            &[&id, &started, &until],
        )
        .await;
    let Ok(history) = history else {
        return unavailable(Some(&login), "runs");
    };
    let Ok((parent, delegated)) = hermes_db::delegations::links(&client, id.into()).await else {
        return unavailable(Some(&login), "runs");
    };
    let Ok(sends) = hermes_db::platform_sends::of_run(&client, id.into()).await else {
        return unavailable(Some(&login), "runs");
    };
    let Ok(calls) = runs::model_calls(&client, id.into()).await else {
        return unavailable(Some(&login), "runs");
    };
    let text = |i: usize| esc(&run.get::<_, Option<String>>(i).unwrap_or_default());
    let trace = run
        .get::<_, Option<String>>(15)
        .and_then(|t| t.split('-').nth(1).map(str::to_string))
        .unwrap_or_default();
    let finished = run
        .get::<_, Option<DateTime<Utc>>>(14)
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|| "not yet".into());
    let mut body = format!(
        "<dl><dt>Run</dt><dd>{id}</dd><dt>Status</dt><dd class=\"{s}\">{s}</dd>\
         <dt>Platform</dt><dd>{}</dd><dt>Sender</dt><dd>{}</dd><dt>Chat</dt><dd>{}</dd>\
         <dt>Tier</dt><dd>{}</dd><dt>Model</dt><dd>{}</dd><dt>Tokens</dt><dd>{} in, {} out</dd>\
         <dt>Cost (USD)</dt><dd>{}</dd><dt>Started</dt><dd>{}</dd><dt>Ended</dt><dd>{}</dd>\
         <dt>Trace</dt><dd>{}</dd><dt>Conversation</dt><dd>{}</dd></dl>",
        text(0),
        text(1),
        text(2),
        text(4),
        text(5),
        run.get::<_, i64>(6),
        run.get::<_, i64>(7),
        dollars(run.get(8)),
        run.get::<_, DateTime<Utc>>(13).to_rfc3339(),
        esc(&finished),
        trace_html(&trace, app.ctx.config.traces.link.as_deref()),
        run.get::<_, Option<uuid::Uuid>>(16)
            .map(|s| format!("<a href=\"/console/conversations/{s}\">{s}</a>"))
            .unwrap_or_default(),
        s = text(3),
    );
    body.push_str(&format!(
        "<h2>Message</h2><pre>{}</pre><h2>Answer</h2><pre>{}</pre>",
        text(9),
        text(10)
    ));
    body.push_str(&tool_calls::html(&runs::transcript_of(run.get(17))));
    body.push_str(&sends_html(&sends));
    if run.get::<_, Option<String>>(11).is_some() {
        body.push_str(&format!(
            "<h2>Failure</h2><p class=\"error\">{}</p><pre>{}</pre>",
            text(11),
            text(12)
        ));
    }
    // Fan-out (docs/a2a.md, "Delegating to other workspaces"): where this run came from,
    // and the runs it started.
    if let Some(p) = &parent {
        body.push_str(&format!(
            "<p>Delegated by <a href=\"/console/runs/{run}\">{run}</a> to {ws}: <q>{task}</q></p>",
            run = p.run,
            ws = esc(&p.workspace),
            task = esc(&p.task),
        ));
    }
    if !delegated.is_empty() {
        body.push_str("<h2>Delegated runs</h2><ul>");
        for d in &delegated {
            body.push_str(&format!(
                "<li><a href=\"/console/runs/{run}\">{run}</a> in {ws}, {status}: <q>{task}</q></li>",
                run = d.run,
                ws = esc(&d.workspace),
                status = esc(&d.status),
                task = esc(&d.task),
            ));
        }
        body.push_str("</ul>");
    }
    let logged = history
        .iter()
        .map(|h| history::Entry {
            at: h.get(0),
            what: h.get(1),
            details: h.get(2),
        })
        .collect();
    body.push_str(&history::html(&history::merged(logged, &calls)));
    if !RunStatus::parse(&run.get::<_, String>(3)).is_some_and(RunStatus::is_final) {
        body.push_str(&live(id));
    }
    page(StatusCode::OK, &format!("Run {id}"), Some(&login), &body)
}

/// The trace id, linked through `HERMES_TRACE_LINK` (a URL with `{trace_id}`) when set.
fn trace_html(trace: &str, link: Option<&str>) -> String {
    match link {
        Some(link) if !trace.is_empty() => format!(
            "<a href=\"{}\">{}</a>",
            esc(&link.replace("{trace_id}", trace)),
            esc(trace)
        ),
        _ => esc(trace),
    }
}

/// The messages the answer went out as, each with what the platform last reported of it
/// (docs/channels.md, "Statuses").
fn sends_html(sends: &[hermes_db::platform_sends::SendView]) -> String {
    if sends.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<table><caption>Sent</caption><thead><tr><th scope=\"col\">Sent</th><th scope=\"col\">Part</th>\
         <th scope=\"col\">Platform message</th><th scope=\"col\">Status</th><th scope=\"col\">Error</th></tr></thead><tbody>",
    );
    for s in sends {
        let status = match s.status_at {
            Some(at) => format!("{} at {}", esc(&s.status), at.format("%H:%M:%S")),
            None => esc(&s.status),
        };
        let error = match (s.error_code, &s.error_title) {
            (Some(code), title) => format!("{code} {}", esc(title.as_deref().unwrap_or(""))),
            (None, Some(title)) => esc(title),
            (None, None) => String::new(),
        };
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{} <code>{}</code></td><td>{status}</td><td>{error}</td></tr>",
            s.sent_at.format("%H:%M:%S"),
            s.part,
            esc(&s.platform),
            esc(&s.platform_message_id),
        ));
    }
    out.push_str("</tbody></table>");
    out
}

/// What a run in flight adds to its page: the list `live.js` fills from the run's event
/// stream, and the script itself (the page reads the same without it).
fn live(id: uuid::Uuid) -> String {
    format!(
        "<section aria-labelledby=\"live\"><h2 id=\"live\">Live</h2>\
         <p class=\"muted\">This run is in flight: what it does shows here as it happens, and the page reloads when it ends.</p>\
         <pre data-live-answer aria-live=\"polite\"></pre>\
         <ol data-live-events=\"/console/runs/{id}/events\" aria-live=\"polite\"></ol></section>\
         <script src=\"/console/static/live.js\" defer></script>"
    )
}

/// `GET /console/runs/{id}/events`: the run's event stream for `live.js`, as
/// `GET /v1/runs/{id}/events` serves it to the operator.
pub async fn events(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: axum::http::HeaderMap,
) -> Response {
    crate::runs::events(
        State(app),
        Extension(crate::rest::Caller::Operator),
        Path(id),
        headers,
    )
    .await
}

fn not_found(login: &Login, id: &str) -> Response {
    page(
        StatusCode::NOT_FOUND,
        "No such run",
        Some(login),
        &format!(
            "<p>No run {}.</p><p><a href=\"/console/runs\">All runs</a></p>",
            esc(id)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_is_linked_only_when_a_link_is_configured() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        assert_eq!(trace_html(trace, None), trace);
        assert_eq!(
            trace_html(
                trace,
                Some("https://grafana.example/explore?t={trace_id}&x=1")
            ),
            format!("<a href=\"https://grafana.example/explore?t={trace}&amp;x=1\">{trace}</a>")
        );
        assert_eq!(trace_html("", Some("https://x/{trace_id}")), "");
    }

    #[test]
    fn a_send_shows_its_status_and_error_inert() {
        let at = Utc::now();
        let row = hermes_db::platform_sends::SendView {
            message_id: uuid::Uuid::now_v7(),
            part: 1,
            platform: "whatsapp".into(),
            platform_message_id: "wamid.<b>".into(),
            sent_at: at,
            status: "failed".into(),
            status_at: Some(at),
            error_code: Some(131047),
            error_title: Some("<script>x</script>".into()),
        };
        let html = sends_html(&[row]);
        assert!(
            html.contains("wamid.&lt;b&gt;") && html.contains("131047 &lt;script&gt;"),
            "{html}"
        );
        assert!(html.contains("failed at "), "{html}");
        assert_eq!(sends_html(&[]), "");
    }

    #[test]
    fn a_cursor_round_trips_and_garbage_reads_as_none() {
        let id = uuid::Uuid::now_v7();
        assert_eq!(decode_cursor(&encode_cursor(id)), Some(id));
        for bad in ["", "!!", "bm9wZQ"] {
            assert_eq!(decode_cursor(bad), None, "{bad}");
        }
    }

    #[test]
    fn money_is_shown_to_the_micro_dollar() {
        assert_eq!(dollars(0), "0.000000");
        assert_eq!(dollars(1_234_567), "1.234567");
    }
}
