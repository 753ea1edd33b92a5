//! `conversations_list` and `conversation_get`. A conversation is a session
//! (docs/architecture.md#9-postgresql): one user's chat on one platform, rolled over to a new
//! session after the router's idle timeout, or a chain of stored API responses (docs/api.md,
//! "Responses"), which belongs to a key and has no user. It is named by its session id (a UUID); its `target`
//! (`<platform>:<chat id>`) is what `messages_send` writes to.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use hermes_types::ids::SessionId;
use serde_json::{Value, json};
use tokio_postgres::Row;

use super::{DEFAULT_LIST, MAX_ID, MAX_LIST, MAX_SEARCH, contains_pattern};
use crate::Operator;
use crate::args::Args;
use crate::catalog::{Spec, limit, object, platform, string};
use crate::error::ToolError;

/// `conversations_list`.
pub const LIST: Spec = Spec {
    name: "conversations_list",
    description: "List conversations (sessions: one user's chat on one platform, or a chain of API \
        responses, which has a key and no user), newest activity first, with the user's name, the \
        message count and the target messages_send writes to. \
        Filter by platform, search by display name, sender id or chat id; page with next_cursor.",
    schema: || {
        object(
            json!({
                "platform": platform(),
                "search": string("Part of the user's display name, a sender id or a chat id (case-insensitive)", MAX_SEARCH),
                "limit": limit(DEFAULT_LIST, MAX_LIST),
                "cursor": string("next_cursor of the previous page", MAX_ID),
            }),
            &[],
        )
    },
};

/// `conversation_get`.
pub const GET: Spec = Spec {
    name: "conversation_get",
    description: "One conversation in detail: platform, chat, user (name, tier, senders), the \
        agent of its latest run, first and last activity, message counts by direction with the first \
        and last message time (message_stats), and its open runs.",
    schema: || {
        object(
            json!({ "conversation_id": {
                "type": "string", "format": "uuid",
                "description": "The conversation's id, as conversations_list shows it",
            } }),
            &["conversation_id"],
        )
    },
};

/// A page position: the last row's activity and id (rows are ordered by both, descending).
fn encode_cursor(at: DateTime<Utc>, id: SessionId) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}.{id}", at.timestamp_micros()))
}

fn decode_cursor(s: &str) -> Result<(DateTime<Utc>, SessionId), ToolError> {
    let bad = || {
        ToolError::invalid("cursor is not a next_cursor of conversations_list")
            .with("argument", "cursor")
    };
    let raw = URL_SAFE_NO_PAD.decode(s).map_err(|_| bad())?;
    let raw = String::from_utf8(raw).map_err(|_| bad())?;
    let (micros, id) = raw.split_once('.').ok_or_else(bad)?;
    let at = micros
        .parse()
        .ok()
        .and_then(DateTime::from_timestamp_micros)
        .ok_or_else(bad)?;
    Ok((at, id.parse().map_err(|_| bad())?))
}

/// One conversation as the list shows it.
fn summary(r: &Row) -> Value {
    let platform: String = r.get("platform");
    let chat: String = r.get("channel_id");
    json!({
        "conversation_id": r.get::<_, SessionId>("id"),
        "platform": platform,
        "chat_id": chat,
        "target": format!("{platform}:{chat}"),
        // An API conversation (a chain of responses) has no user, only the key that made it.
        "user": r.get::<_, Option<uuid::Uuid>>("user_id").map(|id| json!({
            "id": id,
            "display_name": r.get::<_, Option<String>>("display_name"),
            "tier": r.get::<_, Option<String>>("tier"),
        })),
        "api_key_id": r.get::<_, Option<uuid::Uuid>>("api_key_id"),
        "started_at": r.get::<_, DateTime<Utc>>("started_at"),
        "last_activity_at": r.get::<_, DateTime<Utc>>("last_activity_at"),
        "messages": r.get::<_, i64>("messages"),
    })
}

/// An API conversation logs no interactions: its messages are its runs' inputs and answers.
const SELECT: &str = "SELECT s.id, s.platform, s.channel_id, s.started_at, s.last_activity_at,
        s.user_id, s.api_key_id, u.display_name, u.tier,
        CASE WHEN s.user_id IS NULL
             THEN (SELECT count(*) + count(*) FILTER (WHERE r.status = 'completed')
                   FROM agent_runs r WHERE r.session_id = s.id)
             ELSE (SELECT count(*) FROM interactions i WHERE i.session_id = s.id)
        END AS messages
    FROM sessions s LEFT JOIN users u ON u.id = s.user_id";

/// `conversations_list`.
pub async fn list(op: &Operator, args: &Args) -> Result<Value, ToolError> {
    let platform = args.platform()?.map(|p| p.as_str());
    let search = args
        .opt_str("search", MAX_SEARCH)?
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(contains_pattern);
    let limit = args.limit(DEFAULT_LIST, MAX_LIST)?;
    let after = args
        .opt_str("cursor", MAX_ID)?
        .map(decode_cursor)
        .transpose()?;
    let (after_at, after_id) = after.unzip();
    let client = op.db().await?;
    let rows = client
        .query(
            &format!(
                "{SELECT}
                 WHERE ($1::text IS NULL OR s.platform = $1)
                   AND ($2::text IS NULL OR u.display_name ILIKE $2 ESCAPE '\\'
                        OR s.channel_id ILIKE $2 ESCAPE '\\'
                        OR EXISTS (SELECT 1 FROM user_channels c
                                   WHERE c.user_id = s.user_id AND c.platform = s.platform
                                     AND c.sender_id ILIKE $2 ESCAPE '\\'))
                   AND ($3::timestamptz IS NULL OR (s.last_activity_at, s.id) < ($3, $4::uuid))
                 ORDER BY s.last_activity_at DESC, s.id DESC
                 LIMIT $5"
            ),
            &[&platform, &search, &after_at, &after_id, &(limit + 1)],
        )
        .await?;
    let more = rows.len() as i64 > limit;
    let page = &rows[..rows.len().min(limit as usize)];
    let next = match page.last() {
        Some(r) if more => Some(encode_cursor(r.get("last_activity_at"), r.get("id"))),
        _ => None,
    };
    Ok(json!({
        "conversations": page.iter().map(summary).collect::<Vec<_>>(),
        "next_cursor": next,
    }))
}

/// `conversation_get`.
pub async fn get(op: &Operator, args: &Args) -> Result<Value, ToolError> {
    let id: SessionId = args.parsed("conversation_id", "a conversation id (a UUID)")?;
    let client = op.db().await?;
    let Some(row) = client
        .query_opt(&format!("{SELECT} WHERE s.id = $1"), &[&id])
        .await?
    else {
        return Err(ToolError::not_found(format!("no conversation {id}")));
    };
    let mut detail = summary(&row);
    let user_id: Option<uuid::Uuid> = row.get("user_id");
    let platform: String = row.get("platform");
    let counts = client
        .query_one(
            "SELECT count(*) FILTER (WHERE direction = 'inbound'),
                    count(*) FILTER (WHERE direction = 'outbound'),
                    min(created_at), max(created_at)
             FROM interactions WHERE session_id = $1",
            &[&id],
        )
        .await?;
    let senders = client
        .query(
            "SELECT sender_id, activated FROM user_channels
             WHERE user_id = $1 AND platform = $2 ORDER BY id",
            &[&user_id, &platform],
        )
        .await?;
    let agent = client
        .query_opt(
            "SELECT g.profile_key FROM agent_runs r JOIN agents g ON g.id = r.agent_id
             WHERE r.session_id = $1 ORDER BY r.created_at DESC LIMIT 1",
            &[&id],
        )
        .await?;
    let open = client
        .query(
            "SELECT r.id, r.status, r.created_at, g.profile_key FROM agent_runs r
             LEFT JOIN agents g ON g.id = r.agent_id
             WHERE r.session_id = $1
               AND r.status NOT IN ('completed', 'failed', 'cancelled', 'expired')
             ORDER BY r.created_at LIMIT 100",
            &[&id],
        )
        .await?;
    if user_id.is_some() {
        detail["user"]["senders"] = senders
            .iter()
            .map(
                |r| json!({ "sender_id": r.get::<_, String>(0), "activated": r.get::<_, bool>(1) }),
            )
            .collect();
    }
    detail["agent"] = json!(agent.map(|r| r.get::<_, String>(0)));
    detail["message_stats"] = json!({
        "inbound": counts.get::<_, i64>(0),
        "outbound": counts.get::<_, i64>(1),
        "first_at": counts.get::<_, Option<DateTime<Utc>>>(2),
        "last_at": counts.get::<_, Option<DateTime<Utc>>>(3),
    });
    detail["open_runs"] = open
        .iter()
        .map(|r| {
            json!({
                "run_id": r.get::<_, uuid::Uuid>(0),
                "status": r.get::<_, String>(1),
                "created_at": r.get::<_, DateTime<Utc>>(2),
                "agent": r.get::<_, Option<String>>(3),
            })
        })
        .collect();
    Ok(detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_garbage_is_refused() {
        let at = DateTime::from_timestamp_micros(1_764_000_000_123_456).unwrap();
        let id = SessionId::new();
        assert_eq!(decode_cursor(&encode_cursor(at, id)).unwrap(), (at, id));
        for bad in ["", "!!", "bm9wZQ", &URL_SAFE_NO_PAD.encode("1.x")] {
            assert!(decode_cursor(bad).is_err(), "{bad}");
        }
    }
}
