//! The console's conversations (docs/console.md): the operator MCP server's
//! `conversations_list`, `conversation_get` and `messages_read` (`hermes_operator::tools`)
//! rendered as pages, so the console and an operator's agent read the same thing the same
//! way. The list is newest activity first, filtered by platform or a name, sender or chat,
//! paged with the tool's cursor; a conversation's page shows who and where, and its messages
//! (each linked to its run), newest page first, paged back.

use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use hermes_db::console_sessions::Login;
use hermes_operator::error::{ErrorCode, ToolError};
use hermes_operator::tools::{conversations, messages};
use hermes_operator::{Caller, Operator, Transport, args::Args};
use serde::Deserialize;
use serde_json::{Value, json};

use super::html::{esc, page, unavailable};
use crate::AppState;

/// Conversations or messages on one page.
const PAGE: i64 = 50;

/// The list's filters and position, as the form and the links send them.
#[derive(Debug, Default, Deserialize)]
pub struct Filters {
    search: Option<String>,
    platform: Option<String>,
    cursor: Option<String>,
}

/// A conversation's page position.
#[derive(Debug, Default, Deserialize)]
pub struct Before {
    before: Option<i64>,
}

fn operator(app: &AppState, login: &Login) -> Operator {
    let caller = match login.api_key_id {
        None => Caller::OperatorKey,
        Some(id) => Caller::Key { id },
    };
    Operator::new(app.ctx.clone(), caller, Transport::Http)
}

/// `v`'s string fields that are set, as a tool's arguments.
fn set(pairs: &[(&str, Option<&str>)]) -> Value {
    let mut args = serde_json::Map::new();
    for (k, v) in pairs {
        if let Some(v) = v.map(str::trim).filter(|v| !v.is_empty()) {
            args.insert((*k).to_string(), v.into());
        }
    }
    Value::Object(args)
}

/// A tool's refusal as a page: a bad filter is the caller's, anything else the store's.
fn refused(login: &Login, e: &ToolError) -> Response {
    match e.code {
        ErrorCode::InvalidArgument | ErrorCode::NotFound => page(
            if e.code == ErrorCode::NotFound {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::BAD_REQUEST
            },
            "Not shown",
            Some(login),
            &format!(
                "<p class=\"error\" role=\"alert\">{}</p><p><a href=\"/console/conversations\">Conversations</a></p>",
                esc(&e.refusal.message)
            ),
        ),
        _ => unavailable(Some(login), "conversations"),
    }
}

/// `s` for a URL's query string.
fn q(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn text(v: &Value) -> String {
    esc(v.as_str().unwrap_or(""))
}

/// `GET /console/conversations`
pub async fn list(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Query(f): Query<Filters>,
) -> Response {
    let mut args = set(&[
        ("search", f.search.as_deref()),
        ("platform", f.platform.as_deref()),
        ("cursor", f.cursor.as_deref()),
    ]);
    args["limit"] = json!(PAGE);
    let op = operator(&app, &login);
    let listed = match Args::parse(
        conversations::LIST.name,
        &["search", "platform", "cursor", "limit"],
        args,
    ) {
        Ok(args) => conversations::list(&op, &args).await,
        Err(e) => Err(e),
    };
    let listed = match listed {
        Ok(v) => v,
        Err(e) => return refused(&login, &e),
    };
    let search = f.search.as_deref().unwrap_or("");
    let platform = f.platform.as_deref().unwrap_or("");
    let mut body = format!(
        "<form method=\"get\" action=\"/console/conversations\" role=\"search\">\
         <label for=\"search\">Name, sender or chat</label>\
         <input id=\"search\" name=\"search\" maxlength=\"200\" value=\"{}\">\
         <label for=\"platform\">Platform</label>\
         <input id=\"platform\" name=\"platform\" maxlength=\"20\" value=\"{}\" placeholder=\"telegram\">\
         <button type=\"submit\">Filter</button></form>",
        esc(search),
        esc(platform),
    );
    let rows = listed["conversations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if rows.is_empty() {
        body.push_str("<p>No conversation.</p>");
    } else {
        body.push_str(
            "<table><caption>Conversations, newest activity first</caption><thead><tr>\
             <th scope=\"col\">Last activity</th><th scope=\"col\">Where</th>\
             <th scope=\"col\">Who</th><th scope=\"col\">Messages</th></tr></thead><tbody>",
        );
        for c in &rows {
            let who = match c["user"].as_object() {
                Some(u) => u
                    .get("display_name")
                    .and_then(Value::as_str)
                    .map_or_else(|| "(no name)".into(), esc),
                None => "API key".into(),
            };
            body.push_str(&format!(
                "<tr><td>{at}</td><td><a href=\"/console/conversations/{id}\">{target}</a></td>\
                 <td>{who}</td><td>{n}</td></tr>",
                at = text(&c["last_activity_at"]),
                id = text(&c["conversation_id"]),
                target = text(&c["target"]),
                n = c["messages"].as_i64().unwrap_or(0),
            ));
        }
        body.push_str("</tbody></table>");
    }
    if let Some(next) = listed["next_cursor"].as_str() {
        body.push_str(&format!(
            "<p><a href=\"/console/conversations?search={}&amp;platform={}&amp;cursor={}\">Older conversations</a></p>",
            esc(&q(search)),
            esc(&q(platform)),
            esc(&q(next)),
        ));
    }
    page(StatusCode::OK, "Conversations", Some(&login), &body)
}

/// `GET /console/conversations/{id}`
pub async fn show(
    State(app): State<AppState>,
    Extension(login): Extension<Login>,
    Path(id): Path<String>,
    Query(b): Query<Before>,
) -> Response {
    let op = operator(&app, &login);
    let id = id.chars().take(64).collect::<String>();
    let got = async {
        let args = Args::parse(
            conversations::GET.name,
            &["conversation_id"],
            json!({"conversation_id": id}),
        )?;
        let conversation = conversations::get(&op, &args).await?;
        let mut read = json!({"conversation_id": id, "limit": PAGE});
        if let Some(before) = b.before {
            read["before"] = json!(before);
        }
        let args = Args::parse(
            messages::READ.name,
            &["conversation_id", "before", "limit"],
            read,
        )?;
        let messages = messages::read(&op, &args).await?;
        Ok::<_, ToolError>((conversation, messages))
    }
    .await;
    let (c, m) = match got {
        Ok(found) => found,
        Err(e) => return refused(&login, &e),
    };
    let user = &c["user"];
    let who = if user.is_object() {
        format!(
            "<a href=\"/console/users/{}\">{}</a> ({})",
            text(&user["id"]),
            user["display_name"]
                .as_str()
                .map_or_else(|| "(no name)".into(), esc),
            text(&user["tier"]),
        )
    } else {
        "an API key's chain of responses".into()
    };
    let mut body = format!(
        "<dl><dt>Where</dt><dd>{platform} <code>{chat}</code></dd><dt>Who</dt><dd>{who}</dd>\
         <dt>Started</dt><dd>{started}</dd><dt>Last activity</dt><dd>{last}</dd></dl>",
        platform = text(&c["platform"]),
        chat = text(&c["chat_id"]),
        started = text(&c["started_at"]),
        last = text(&c["last_activity_at"]),
    );
    let messages = m["messages"].as_array().cloned().unwrap_or_default();
    if m["has_more"].as_bool() == Some(true)
        && let Some(first) = messages.first().and_then(|f| f["message_id"].as_i64())
    {
        body.push_str(&format!(
            "<p><a href=\"/console/conversations/{}?before={first}\">Earlier messages</a></p>",
            esc(&id)
        ));
    }
    body.push_str("<ol class=\"history\">");
    for msg in &messages {
        let from = if msg["direction"] == "inbound" {
            "User"
        } else {
            "Hermes"
        };
        body.push_str(&format!(
            "<li><strong>{from}</strong> <time>{at}</time> (<a href=\"/console/runs/{run}\">run</a>)<pre>{text}</pre></li>",
            at = text(&msg["created_at"]),
            run = text(&msg["run_id"]),
            text = text(&msg["text"]),
        ));
    }
    body.push_str("</ol>");
    if messages.is_empty() {
        body.push_str("<p>No message.</p>");
    }
    page(StatusCode::OK, "Conversation", Some(&login), &body)
}
