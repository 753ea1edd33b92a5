//! `messages_read` (a conversation's history from `interactions`, paged by message id) and
//! `attachments_fetch` (a message's media). Hermes keeps the text of every inbound and
//! outbound message, but not the media of chat messages: the router reads an image's
//! platform id or link to build the model's turn and stores only the text. So
//! `attachments_fetch` answers what is kept, which today is an empty list and a note saying
//! why (docs/operator-mcp.md, "The tools"); it does not guess links it never stored.

use chrono::{DateTime, Utc};
use hermes_types::ids::SessionId;
use serde_json::{Value, json};

use super::{DEFAULT_LIST, MAX_LIST};
use crate::Operator;
use crate::args::Args;
use crate::catalog::{Spec, limit, object};
use crate::error::ToolError;

/// A message id argument (`interactions.id`).
fn message_id(description: &str) -> Value {
    json!({ "type": "integer", "minimum": 1, "maximum": i64::MAX, "description": description })
}

/// `messages_read`.
pub const READ: Spec = Spec {
    name: "messages_read",
    description: "Read a conversation's messages, oldest to newest within a page: direction \
        (inbound from the user, outbound from Hermes), text, time, run id. Without before/after \
        the newest page; `before` pages back (pass the first message_id you have), `after` pages \
        forward (pass the last). has_more says whether more lie that way.",
    schema: || {
        object(
            json!({
                "conversation_id": {
                    "type": "string", "format": "uuid",
                    "description": "The conversation's id, as conversations_list shows it",
                },
                "before": message_id("Only messages older than this message id"),
                "after": message_id("Only messages newer than this message id"),
                "limit": limit(DEFAULT_LIST, MAX_LIST),
            }),
            &["conversation_id"],
        )
    },
};

/// `attachments_fetch`.
pub const ATTACHMENTS: Spec = Spec {
    name: "attachments_fetch",
    description: "The media of one message (its message_id from messages_read): links or bytes \
        of what Hermes kept. Hermes does not keep the media of chat messages yet, so the list is \
        empty and `note` says so.",
    schema: || {
        object(
            json!({ "message_id": message_id("The message, as messages_read shows it") }),
            &["message_id"],
        )
    },
};

/// Why a message's attachment list is empty.
pub const NO_MEDIA_KEPT: &str = "Hermes keeps the text of chat messages but not their media: \
    an image, voice note or file a user sent was handed to the model with that message and not \
    stored, so there is nothing to fetch";

/// `messages_read`.
pub async fn read(op: &Operator, args: &Args) -> Result<Value, ToolError> {
    let id: SessionId = args.parsed("conversation_id", "a conversation id (a UUID)")?;
    let before = args.opt_int("before", 1, i64::MAX)?;
    let after = args.opt_int("after", 1, i64::MAX)?;
    if before.is_some() && after.is_some() {
        return Err(ToolError::invalid("give before or after, not both").with("argument", "after"));
    }
    let limit = args.limit(DEFAULT_LIST, MAX_LIST)?;
    let client = op.db().await?;
    if client
        .query_opt("SELECT 1 FROM sessions WHERE id = $1", &[&id])
        .await?
        .is_none()
    {
        return Err(ToolError::not_found(format!("no conversation {id}")));
    }
    // Forward from `after` in ascending order; otherwise backward from `before` (or the
    // end) in descending order, turned around below.
    let forward = after.is_some();
    let rows = client
        .query(
            if forward {
                "SELECT id, direction, text, created_at, run_id FROM interactions
                 WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT $3"
            } else {
                "SELECT id, direction, text, created_at, run_id FROM interactions
                 WHERE session_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3"
            },
            &[&id, &after.or(before).unwrap_or(i64::MAX), &(limit + 1)],
        )
        .await?;
    let has_more = rows.len() as i64 > limit;
    let mut page: Vec<Value> = rows
        .iter()
        .take(limit as usize)
        .map(|r| {
            json!({
                "message_id": r.get::<_, i64>(0),
                "direction": r.get::<_, String>(1),
                "text": r.get::<_, String>(2),
                "created_at": r.get::<_, DateTime<Utc>>(3),
                "run_id": r.get::<_, uuid::Uuid>(4),
            })
        })
        .collect();
    if !forward {
        page.reverse();
    }
    Ok(json!({ "conversation_id": id, "messages": page, "has_more": has_more }))
}

/// `attachments_fetch`.
pub async fn attachments(op: &Operator, args: &Args) -> Result<Value, ToolError> {
    let Some(message) = args.opt_int("message_id", 1, i64::MAX)? else {
        return Err(ToolError::invalid("message_id is required").with("argument", "message_id"));
    };
    let client = op.db().await?;
    let Some(row) = client
        .query_opt(
            "SELECT session_id, direction FROM interactions WHERE id = $1",
            &[&message],
        )
        .await?
    else {
        return Err(ToolError::not_found(format!("no message {message}")));
    };
    Ok(json!({
        "message_id": message,
        "conversation_id": row.get::<_, SessionId>(0),
        "direction": row.get::<_, String>(1),
        "attachments": [],
        "note": NO_MEDIA_KEPT,
    }))
}
