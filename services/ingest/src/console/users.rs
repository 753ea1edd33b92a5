//! The console's users (docs/console.md): the newest first, paged, found by id or by a chat
//! platform's sender; a user's page with credits, tier, tokens used today and this month
//! against the tier's budgets, and linked channels; and erasing a person, confirmed by typing
//! their id. The erase is `hermes users erase`'s (`hermes_operator::erase`), and it is written
//! to the activity log with who did it, never with what was erased.

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use hermes_db::console_sessions::Login;
use hermes_db::{budgets, users};
use hermes_operator::erase::{self, EraseError};
use hermes_types::ids::UserId;
use hermes_types::model::Platform;
use serde::Deserialize;

use super::html::{esc, log_action, page, refusal, see_other, unavailable};
use super::session::{csrf_ok, field, forbidden};
use crate::AppState;

/// Users on one page.
const PAGE: i64 = 50;

/// The list's search and position.
#[derive(Debug, Default, Deserialize)]
pub struct Search {
    q: Option<String>,
    before: Option<String>,
}

/// What a search names: a user id, or `platform:sender` of a chat platform.
pub(super) enum Wanted {
    User(UserId),
    Sender(Platform, String),
}

pub(super) fn wanted(q: &str) -> Option<Wanted> {
    let q = q.trim();
    if let Ok(id) = q.parse::<UserId>() {
        return Some(Wanted::User(id));
    }
    let (platform, sender) = q.split_once(':')?;
    let platform = Platform::parse(platform.trim()).filter(|p| p.is_chat())?;
    let sender = sender.trim();
    (!sender.is_empty() && sender.len() <= 200).then(|| Wanted::Sender(platform, sender.into()))
}

/// `GET /console/users`: a search goes straight to the user it names.
pub async fn list(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Query(s): Query<Search>,
) -> Response {
    let q = s.q.as_deref().map(str::trim).filter(|q| !q.is_empty());
    let Ok(client) = app.ctx.db.get().await else {
        return unavailable(Some(&login), "users");
    };
    let mut notice = String::new();
    if let Some(q) = q {
        let found = match wanted(q) {
            Some(Wanted::User(id)) => Ok(Some(id)),
            Some(Wanted::Sender(platform, sender)) => {
                users::of_chat_sender(&client, platform, &sender).await
            }
            None => Ok(None),
        };
        match found {
            Ok(Some(id)) => return see_other(&format!("/console/users/{id}")),
            Ok(None) => {
                notice = format!(
                    "<p class=\"error\" role=\"alert\">No user is {}: give a user id, or a chat platform and sender as telegram:42.</p>",
                    esc(q)
                )
            }
            Err(_) => return unavailable(Some(&login), "users"),
        }
    }
    let before = s.before.as_deref().and_then(|b| b.parse::<UserId>().ok());
    let Ok(shown) = users::page(&client, before, PAGE).await else {
        return unavailable(Some(&login), "users");
    };
    let mut body = format!(
        "<form method=\"get\" action=\"/console/users\" role=\"search\">\
         <label for=\"q\">User id, or platform:sender</label>\
         <input id=\"q\" name=\"q\" maxlength=\"250\" placeholder=\"telegram:42\">\
         <button type=\"submit\">Find</button></form>{notice}"
    );
    body.push_str(
        "<table><caption>Users, newest first</caption><thead><tr><th scope=\"col\">User</th>\
         <th scope=\"col\">Name</th><th scope=\"col\">Tier</th><th scope=\"col\">Credits</th>\
         <th scope=\"col\">Since</th></tr></thead><tbody>",
    );
    for u in &shown {
        body.push_str(&format!(
            "<tr><td><a href=\"/console/users/{id}\">{id}</a></td><td>{name}</td><td>{tier}</td>\
             <td>{credits}</td><td>{since}</td></tr>",
            id = u.id,
            name = esc(u.display_name.as_deref().unwrap_or("")),
            tier = u.tier.as_str(),
            credits = u.credits,
            since = u.created_at.to_rfc3339(),
        ));
    }
    body.push_str("</tbody></table>");
    if shown.len() == PAGE as usize
        && let Some(last) = shown.last()
    {
        body.push_str(&format!(
            "<p><a href=\"/console/users?before={}\">Older users</a></p>",
            last.id
        ));
    }
    page(StatusCode::OK, "Users", Some(&login), &body)
}

/// `GET /console/users/{id}`
pub async fn show(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Path(id): Path<String>,
) -> Response {
    let not_found = || {
        page(
            StatusCode::NOT_FOUND,
            "No such user",
            Some(&login),
            "<p>No such user (erased, or never made).</p><p><a href=\"/console/users\">Users</a></p>",
        )
    };
    let Ok(id) = id.parse::<UserId>() else {
        return not_found();
    };
    let read = async {
        let client = app.ctx.db.get().await?;
        let Some(user) = users::get(&client, id).await? else {
            return Ok(None);
        };
        let channels = users::channels(&client, id).await?;
        let used = budgets::tokens_used(&client, id, Utc::now().date_naive()).await?;
        Ok::<_, hermes_db::DbError>(Some((user, channels, used)))
    }
    .await;
    let (user, channels, used) = match read {
        Ok(Some(found)) => found,
        Ok(None) => return not_found(),
        Err(_) => return unavailable(Some(&login), "users"),
    };
    let budget = app.ctx.config.llm.budgets.get(&user.tier);
    let of = |used: u64, limit: Option<u64>| match limit {
        Some(l) => format!("{used} of {l}"),
        None => format!("{used} (no budget for this tier)"),
    };
    let mut body = format!(
        "<dl><dt>Name</dt><dd>{name}</dd><dt>Tier</dt><dd>{tier}</dd>\
         <dt>Credits</dt><dd>{credits}</dd><dt>Workspace</dt><dd>{workspace}</dd>\
         <dt>Agent</dt><dd>{agent}</dd><dt>Since</dt><dd>{since}</dd>\
         <dt>Tokens today (UTC)</dt><dd>{day}</dd><dt>Tokens this month</dt><dd>{month}</dd></dl>",
        name = esc(user.display_name.as_deref().unwrap_or("(none)")),
        tier = user.tier.as_str(),
        credits = user.credits,
        workspace = user.workspace_id,
        agent = user
            .agent_id
            .map_or_else(|| "(none)".to_string(), |a| a.to_string()),
        since = user.created_at.to_rfc3339(),
        day = of(used.day, budget.map(|b| b.daily_tokens)),
        month = of(used.month, budget.map(|b| b.monthly_tokens)),
    );
    body.push_str(&format!(
        "<p><a href=\"/console/runs?user={}\">Their runs</a></p><h2>Linked channels</h2>",
        user.id
    ));
    if channels.is_empty() {
        body.push_str("<p>None.</p>");
    } else {
        body.push_str("<ul>");
        for c in &channels {
            let runs = format!(
                "/console/runs?user={}",
                url_encode(&format!("{}:{}", c.platform, c.sender_id))
            );
            body.push_str(&format!(
                "<li>{platform} <code>{sender}</code>{off} (<a href=\"{runs}\">runs</a>)</li>",
                platform = esc(&c.platform),
                sender = esc(&c.sender_id),
                off = if c.activated { "" } else { ", not activated" },
                runs = esc(&runs),
            ));
        }
        body.push_str("</ul>");
    }
    body.push_str(&format!(
        "<h2>Erase</h2><p>Removes every row about this person and the senders linked to them, and every Redis key naming them, for good (docs/security.md, \"Erasing a person\").</p>\
         <form method=\"post\" action=\"/console/users/{id}/erase\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <label for=\"confirm\">Type the user id <code>{id}</code> to confirm</label>\
         <input id=\"confirm\" name=\"confirm\" required autocomplete=\"off\">\
         <button type=\"submit\">Erase this person</button></form>",
        csrf = esc(&login.csrf),
    ));
    page(StatusCode::OK, "User", Some(&login), &body)
}

/// `s` for a URL's query string.
fn url_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// `POST /console/users/{id}/erase`: with the login's CSRF token and the id typed again.
pub async fn erase(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    if !csrf_ok(&login, field(&body, "csrf").as_deref()) {
        return forbidden(Some(&login));
    }
    let back = format!("/console/users/{}", esc(&id));
    let refused = |status, why: &str| refusal(status, "Not erased", &login, why, &back);
    let Ok(user) = id.parse::<UserId>() else {
        return refused(StatusCode::NOT_FOUND, "No such user.");
    };
    if field(&body, "confirm").as_deref().map(str::trim) != Some(id.as_str()) {
        return refused(
            StatusCode::BAD_REQUEST,
            "Type the user's id exactly to confirm the erase.",
        );
    }
    let Ok(client) = app.ctx.db.get().await else {
        return refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "Cannot reach PostgreSQL; try again shortly.",
        );
    };
    let done = erase::erase(&app.ctx.config, &client, &app.ctx.cache, user, |_, _| {}).await;
    let done = match done {
        Ok(done) => done,
        Err(EraseError::NoSuchUser(_)) => {
            return refused(StatusCode::NOT_FOUND, "No such user (already erased?).");
        }
        Err(e) => {
            tracing::warn!(%user, error = %e, "erase from the console stopped part-way");
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "The erase stopped part-way (PostgreSQL or Redis did not answer); erase again to finish it.",
            );
        }
    };
    let rows: u64 = done.tables.iter().map(|(_, n)| n).sum();
    let by = super::approvals::answered_by(&login);
    tracing::warn!(%user, %by, rows, redis_keys = done.redis_keys, "user erased from the console");
    log_action(
        &app,
        "user_erased",
        serde_json::json!({
            "by": by, "user_id": user, "rows": rows, "redis_keys": done.redis_keys,
            "from": "console",
        }),
    )
    .await;
    let mut body = format!(
        "<p class=\"completed\" role=\"status\">User {user} erased: {rows} rows and {} Redis keys removed.</p><ul>",
        done.redis_keys
    );
    for (table, n) in done.tables.iter().filter(|(_, n)| *n > 0) {
        body.push_str(&format!("<li>{table}: {n}</li>"));
    }
    body.push_str("</ul><p><a href=\"/console/users\">Users</a></p>");
    page(StatusCode::OK, "Erased", Some(&login), &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_names_a_user_or_a_chat_sender() {
        let id = UserId::new();
        assert!(matches!(wanted(&id.to_string()), Some(Wanted::User(u)) if u == id));
        assert!(matches!(
            wanted(" telegram:42 "),
            Some(Wanted::Sender(Platform::Telegram, s)) if s == "42"
        ));
        assert!(
            wanted("rest:alice").is_none(),
            "a key's sender is found by its user"
        );
        assert!(wanted("telegram:").is_none());
        assert!(wanted("alice").is_none());
    }
}
