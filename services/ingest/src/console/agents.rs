//! The console's agents (docs/console.md): a workspace's agents with their presence (an
//! external agent silent past `HERMES_AGENT_PRESENCE_SECS` counts as offline, as dispatch
//! counts it), their open runs against their capacity, and how their runs of the last 24
//! hours went: how many, the median time to acknowledge and to answer, re-wakes and expiries.

use std::time::Duration;

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use hermes_db::agents::{self, RecentRuns};
use hermes_db::console_sessions::Login;
use hermes_types::agent::{AgentKind, AgentStatus};
use serde::Deserialize;

use super::html::{esc, page, unavailable};
use crate::AppState;

/// The window of the runs' figures.
const RECENT: Duration = Duration::from_secs(24 * 3600);

/// Which workspace.
#[derive(Debug, Default, Deserialize)]
pub struct Chosen {
    workspace: Option<String>,
}

/// A number of seconds as the page shows it.
fn secs(s: Option<f64>) -> String {
    s.map_or_else(|| "—".into(), |s| format!("{s:.1} s"))
}

/// `GET /console/agents`
pub async fn list(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Query(c): Query<Chosen>,
) -> Response {
    let slug = c
        .workspace
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() <= 40)
        .unwrap_or("default")
        .to_string();
    let read = async {
        let client = app.ctx.db.get().await?;
        let workspaces = hermes_db::workspaces::list(&client).await?;
        let mut shown = Vec::new();
        for (agent, open) in agents::list(&client, &slug).await? {
            let recent = agents::recent_runs(&client, agent.id, RECENT).await?;
            shown.push((agent, open, recent));
        }
        Ok::<_, hermes_db::DbError>((workspaces, shown))
    }
    .await;
    let Ok((workspaces, shown)) = read else {
        return unavailable(Some(&login), "agents");
    };
    let mut body = String::from(
        "<form method=\"get\" action=\"/console/agents\"><label for=\"workspace\">Workspace</label>\
         <select id=\"workspace\" name=\"workspace\">",
    );
    for w in &workspaces {
        let selected = if w.slug == slug { " selected" } else { "" };
        body.push_str(&format!(
            "<option value=\"{s}\"{selected}>{s}</option>",
            s = esc(&w.slug)
        ));
    }
    body.push_str("</select><button type=\"submit\">Show</button></form>");
    if shown.is_empty() {
        body.push_str("<p>No agent in this workspace: the built-in persona answers its users.</p>");
        return page(StatusCode::OK, "Agents", Some(&login), &body);
    }
    let presence = app.ctx.config.router.agent_presence;
    body.push_str(
        "<table><caption>Agents, and their runs of the last 24 hours</caption><thead><tr>\
         <th scope=\"col\">Agent</th><th scope=\"col\">Kind</th><th scope=\"col\">Presence</th>\
         <th scope=\"col\">Open runs</th><th scope=\"col\">Runs</th>\
         <th scope=\"col\">To acknowledge (median)</th><th scope=\"col\">To answer (median)</th>\
         <th scope=\"col\">Re-wakes</th><th scope=\"col\">Expired</th></tr></thead><tbody>",
    );
    for (agent, open, recent) in &shown {
        let state = if agent.is_silent(presence, Utc::now()) {
            AgentStatus::Offline
        } else {
            agent.status
        };
        let heard = match (agent.kind, agent.last_heartbeat_at) {
            (AgentKind::Internal, _) => String::new(),
            (AgentKind::External, Some(at)) => format!(", heard {}", at.to_rfc3339()),
            (AgentKind::External, None) => ", never heard".into(),
        };
        let RecentRuns {
            runs,
            ack_p50_secs,
            answer_p50_secs,
            rewakes,
            expired,
        } = recent;
        body.push_str(&format!(
            "<tr><td><strong>{key}</strong> {name}</td><td>{kind}</td><td>{state}{heard}</td>\
             <td>{open} of {max}</td><td>{runs}</td><td>{ack}</td><td>{answer}</td>\
             <td>{rewakes}</td><td>{expired}</td></tr>",
            key = esc(&agent.profile_key),
            name = esc(&agent.display_name),
            kind = agent.kind.as_str(),
            state = state.as_str(),
            max = agent.max_concurrent,
            ack = secs(*ack_p50_secs),
            answer = secs(*answer_p50_secs),
        ));
    }
    body.push_str("</tbody></table>");
    page(StatusCode::OK, "Agents", Some(&login), &body)
}
