//! `messages_read` (a conversation's messages, paged by message id both ways) and
//! `attachments_fetch` (a message's media). Hermes keeps the text of every inbound and
//! outbound message and, for an inbound one, references to the files it carried: the
//! platform's file id or the URL the platform sent, as the router recorded them in the
//! message's `meta` (docs/channels.md, media). No bytes are kept and no download URL is
//! built: a Telegram download URL holds the bot token (docs/operator-mcp.md, "The tools").

use chrono::{DateTime, Utc};
use hermes_types::ids::SessionId;
use hermes_types::model::Media;
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
    description: "The media of one message (its message_id from messages_read): for each file         the user sent, its kind (image, voice, audio, document, video, sticker), the platform's         file id or the URL the platform sent, and the MIME type the platform named. These are         references: Hermes keeps no bytes of media, and fetches a file from its platform when         a model or a transcription needs it. `note` says what the list is.",
    schema: || {
        object(
            json!({ "message_id": message_id("The message, as messages_read shows it") }),
            &["message_id"],
        )
    },
};

/// What an attachment list holds.
pub const MEDIA_REFERENCES: &str = "References to the files the user sent, as the platform     named them (a file id, or the URL it sent); Hermes keeps no bytes of media and fetches a     file from its platform, with the platform's credentials, only when it is needed";

/// Why a message's attachment list is empty.
pub const NO_MEDIA: &str = "No media is recorded for this message: it carried none, it is     one of Hermes' own answers, or it was received before media references were kept";

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
            "SELECT i.session_id, i.direction, i.meta -> 'media', r.platform
             FROM interactions i LEFT JOIN agent_runs r ON r.id = i.run_id
             WHERE i.id = $1",
            &[&message],
        )
        .await?
    else {
        return Err(ToolError::not_found(format!("no message {message}")));
    };
    let platform: Option<String> = row.get(3);
    let media: Vec<Media> = row
        .get::<_, Option<Value>>(2)
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let attachments: Vec<Value> = media
        .iter()
        .map(|m| m.attachment(platform.as_deref()))
        .collect();
    let note = if attachments.is_empty() {
        NO_MEDIA
    } else {
        MEDIA_REFERENCES
    };
    Ok(json!({
        "message_id": message,
        "conversation_id": row.get::<_, SessionId>(0),
        "direction": row.get::<_, String>(1),
        "attachments": attachments,
        "note": note,
    }))
}
