//! `events_poll` and `events_wait`: the event log after a cursor (docs/operator-mcp.md,
//! events). The cursor is a position in PostgreSQL (`hermes_db::events`), so a client
//! resumes where it was on any replica, after any restart. `events_wait` blocks on the
//! process's event hub (one `LISTEN` for every waiter), never on a polling loop. A cursor
//! is text (`"<tx>.<id>"`, `"0"`, `"latest"`) or, as the MCP document writes it, an integer
//! (`after_cursor=0`, `42`: an event's sequence number); the answer's cursors take the form
//! the call used, and each works passed back in either.

use std::time::Duration;

use chrono::Utc;
use hermes_db::events::{self, Cursor, Event, EventKind, Filter, Page};
use serde_json::{Map, Value, json};

use crate::Operator;
use crate::args::{Args, StrOrCount};
use crate::catalog::{Spec, object, platform};
use crate::error::ToolError;

/// The longest cursor accepted (two 64-bit integers and a dot, with room).
const MAX_CURSOR: usize = 48;
/// The default and largest page.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 500;
/// How long `events_wait` waits by default, and at most: below the idle timeouts of common
/// HTTP proxies and load balancers (60 s), so a wait over `POST /mcp` is not cut off.
const DEFAULT_WAIT_MS: i64 = 30_000;
const MAX_WAIT_MS: i64 = 60_000;
/// The cursor that means "only what comes next".
const LATEST: &str = "latest";

fn kinds_schema() -> Value {
    json!({
        "type": "array", "maxItems": EventKind::ALL.len(), "uniqueItems": true,
        "items": { "type": "string", "enum": EventKind::ALL.map(EventKind::as_str) },
        "description": "Only events of these kinds (default: all)",
    })
}

fn limit_schema() -> Value {
    crate::catalog::limit(DEFAULT_LIMIT, MAX_LIMIT)
}

/// `events_poll`.
pub const POLL: Spec = Spec {
    name: "events_poll",
    description: "Events after a cursor, oldest first: messages in and out, approvals requested \
        and resolved, replies that could not be delivered. Start with after_cursor \"0\" (the \
        whole log) or \"latest\" (only what comes next), then pass the next_cursor each call \
        returns; it works on any Hermes replica and after restarts. A cursor may also be an \
        integer (0, 42: an event's sequence number); the answer's cursors are then integers, \
        and any cursor works as a string or an integer. held_back: true means \
        committed events are briefly held back by a transaction still running; poll again.",
    schema: || {
        object(
            json!({
                "after_cursor": cursor_schema(
                    "Where to read from: 0, \"latest\", or a next_cursor (default \"latest\")",
                ),
                "limit": limit_schema(),
                "kinds": kinds_schema(),
                "platform": platform(),
            }),
            &[],
        )
    },
};

/// `events_wait`.
pub const WAIT: Spec = Spec {
    name: "events_wait",
    description: "Like events_poll, but blocks until at least one event after the cursor \
        exists or timeout_ms passes (then events is empty; continue from next_cursor). Woken by \
        a PostgreSQL notification, not by polling.",
    schema: || {
        object(
            json!({
                "after_cursor": cursor_schema(
                    "A next_cursor from an earlier call, 0 or \"latest\"",
                ),
                "timeout_ms": {
                    "type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS,
                    "default": DEFAULT_WAIT_MS,
                    "description": format!("How long to wait at most (default {DEFAULT_WAIT_MS}, at most {MAX_WAIT_MS}: HTTP proxies cut longer requests)"),
                },
                "limit": limit_schema(),
                "kinds": kinds_schema(),
                "platform": platform(),
            }),
            &["after_cursor"],
        )
    },
};

/// The `after_cursor` schema: text or a non-negative integer.
fn cursor_schema(description: &str) -> Value {
    json!({
        "type": ["string", "integer"], "maxLength": MAX_CURSOR, "minimum": 0,
        "description": description,
    })
}

/// The form a call gave its cursor in, which its answer's cursors take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// `"<tx>.<id>"`.
    Text,
    /// An event's sequence number.
    Integer,
}

impl Form {
    fn show(self, c: Cursor) -> Value {
        match self {
            Form::Text => c.to_string().into(),
            Form::Integer => c.sequence().into(),
        }
    }
}

/// The cursor argument and its form: `"latest"` is the head of the log now; an integer, or
/// text of digits only, is an event's sequence number (`0` and `"0"`: the start).
async fn cursor(op: &Operator, given: Option<StrOrCount<'_>>) -> Result<(Cursor, Form), ToolError> {
    let bad = |e: String| ToolError::invalid(e).with("argument", "after_cursor");
    match given {
        Some(StrOrCount::Count(seq)) => Ok((
            events::at_sequence(&op.db().await?, seq).await?,
            Form::Integer,
        )),
        Some(StrOrCount::Str(s)) => match s.trim() {
            LATEST => Ok((events::head(&op.db().await?).await?, Form::Text)),
            digits if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                let seq: i64 = digits
                    .parse()
                    .map_err(|_| bad(format!("cursor {digits:?} is too large")))?;
                Ok((events::at_sequence(&op.db().await?, seq).await?, Form::Text))
            }
            c => c
                .parse()
                .map(|c| (c, Form::Text))
                .map_err(|e: events::BadCursor| bad(e.to_string())),
        },
        None => Ok((events::head(&op.db().await?).await?, Form::Text)),
    }
}

/// The `kinds` and `platform` filter.
fn filter(args: &Args) -> Result<Filter, ToolError> {
    let kinds = args
        .opt_strs("kinds", EventKind::ALL.len(), 32)?
        .map(|names| {
            names
                .into_iter()
                .map(|k| {
                    EventKind::parse(k).ok_or_else(|| {
                        ToolError::invalid(format!(
                            "kinds: {k:?} is not one of {}",
                            EventKind::ALL.map(EventKind::as_str).join(", ")
                        ))
                        .with("argument", "kinds")
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    Ok(Filter {
        kinds,
        platform: args.platform()?,
        session_id: None,
    })
}

/// An event as clients get it: its position and where it happened, then its own fields.
fn event_json(e: &Event, form: Form) -> Value {
    let mut out = Map::new();
    out.insert("cursor".into(), form.show(e.cursor));
    out.insert("kind".into(), e.kind.as_str().into());
    out.insert("platform".into(), json!(e.platform));
    out.insert("chat_id".into(), json!(e.chat_id));
    out.insert("conversation".into(), json!(e.session_id));
    out.insert("run_id".into(), json!(e.run_id));
    out.insert("created_at".into(), json!(e.created_at));
    match &e.body {
        Value::Object(body) => {
            for (k, v) in body {
                out.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        Value::Null => {}
        other => {
            out.insert("body".into(), other.clone());
        }
    }
    Value::Object(out)
}

/// The page as the tool answers it, counting what it hands out (by `tool`).
fn answer(op: &Operator, tool: &str, page: &Page, form: Form) -> Value {
    let m = &op.ctx.metrics.operator;
    let now = Utc::now();
    for e in &page.events {
        m.events.with_label_values(&[tool, e.kind.as_str()]).inc();
        let lag = (now - e.created_at).num_microseconds().unwrap_or(0).max(0);
        m.event_lag
            .with_label_values(&[tool])
            .observe(lag as f64 / 1e6);
    }
    json!({
        "events": page.events.iter().map(|e| event_json(e, form)).collect::<Vec<_>>(),
        "next_cursor": form.show(page.next),
        "held_back": page.held_back,
    })
}

/// `events_poll`.
pub async fn poll(op: &Operator, args: &Args) -> Result<Value, ToolError> {
    let (after, form) = cursor(op, args.opt_str_or_count("after_cursor", MAX_CURSOR)?).await?;
    let filter = filter(args)?;
    let limit = args.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
    let page = events::after(&op.db().await?, after, &filter, limit).await?;
    Ok(answer(op, POLL.name, &page, form))
}

/// `events_wait`.
pub async fn wait(op: &Operator, args: &Args) -> Result<Value, ToolError> {
    let given = args.opt_str_or_count("after_cursor", MAX_CURSOR)?;
    if given.is_none() {
        return Err(ToolError::invalid("after_cursor is required").with("argument", "after_cursor"));
    }
    let (after, form) = cursor(op, given).await?;
    let filter = filter(args)?;
    let limit = args.limit(DEFAULT_LIMIT, MAX_LIMIT)?;
    let timeout = args
        .opt_int("timeout_ms", 0, MAX_WAIT_MS)?
        .unwrap_or(DEFAULT_WAIT_MS);
    let hub = op.ctx.event_hub();
    let page = hub
        .wait(after, &filter, limit, Duration::from_millis(timeout as u64))
        .await?;
    Ok(answer(op, WAIT.name, &page, form))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_shows_its_place_then_its_body() {
        let e = Event {
            cursor: "7.3".parse().unwrap(),
            kind: EventKind::Message,
            workspace_id: None,
            platform: Some("telegram".into()),
            chat_id: Some("42".into()),
            session_id: None,
            run_id: None,
            body: json!({ "direction": "inbound", "text": "hi", "kind": "spoofed" }),
            created_at: Utc::now(),
        };
        let v = event_json(&e, Form::Text);
        assert_eq!(v["cursor"], "7.3");
        assert_eq!(
            v["kind"], "message",
            "the body cannot overwrite the envelope"
        );
        assert_eq!(v["direction"], "inbound");
        assert_eq!(v["chat_id"], "42");
        assert_eq!(event_json(&e, Form::Integer)["cursor"], 3);
    }
}
