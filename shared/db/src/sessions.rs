//! Sessions (docs/architecture.md#9-postgresql, docs/models-and-budgets.md): one conversation
//! per user, platform and channel, rolled over to a new session after the idle timeout, and
//! its history read back from `interactions` (written by `interactions.rs`).

use hermes_types::ids::{ApiKeyId, SessionId, UserId};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use deadpool_postgres::GenericClient;

use super::{DbError, Transaction};
use crate::interactions::Direction;
use hermes_types::model::{ChatMessage, Platform};

/// Keeps session locks apart from every other user of two-key advisory locks. Single-key
/// locks (the migration lock) live in a separate key space and cannot collide with these.
const SESSION_LOCK_CLASS: i32 = 0x5345_5353; // "SESS"

/// The session a message belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Session {
    /// The session's id (UUID v7, so ids sort by start time).
    pub id: SessionId,
    /// When the session's first message arrived.
    pub started_at: DateTime<Utc>,
    /// True when this message opened the session (the cached history starts empty).
    pub is_new: bool,
}

/// The session of `user_id` on `platform` and `channel_id` at `now`: the latest one,
/// with its activity moved to `now`, unless it has been idle longer than `idle`, in which
/// case a new one is opened. `now` is a parameter so tests can move the clock.
///
/// Must run in a READ COMMITTED transaction (the default): after waiting for the scope's
/// lock, the lookup has to see the session a concurrent transaction just committed.
pub async fn current_or_start(
    tx: &Transaction<'_>,
    user_id: UserId,
    platform: Platform,
    channel_id: &str,
    now: DateTime<Utc>,
    idle: Duration,
) -> Result<Session, DbError> {
    // Two first messages arriving together must not open two sessions. A row lock (SELECT
    // … FOR UPDATE on the latest session) cannot prevent that: when there is no session
    // yet, or the latest one has expired, there is no row that both would lock. So the
    // scope itself is locked, with a transaction advisory lock released at commit. A hash
    // collision between two scopes only makes them wait for each other, never merges them.
    let scope = format!("{user_id}/{}/{channel_id}", platform.as_str());
    tx.execute(
        &crate::stmt(tx, "SELECT pg_advisory_xact_lock($1, hashtext($2))").await?,
        &[&SESSION_LOCK_CLASS, &scope],
    )
    .await?;
    current_or_start_locked(tx, user_id, platform, channel_id, now, idle).await
}

/// [`current_or_start`] for a caller whose transaction already holds the user's row lock
/// (the router, after charging the credit): that lock serializes the user's messages, so
/// the scope lock would only cost a round trip.
pub async fn current_or_start_locked(
    tx: &Transaction<'_>,
    user_id: UserId,
    platform: Platform,
    channel_id: &str,
    now: DateTime<Utc>,
    idle: Duration,
) -> Result<Session, DbError> {
    // Continue the latest session if it is still live, moving its activity on, in one
    // round trip.
    let cutoff = idle_cutoff(now, idle);
    let continued = tx
        .query_opt(
            &crate::stmt(
                tx,
                "UPDATE sessions SET last_activity_at = GREATEST(last_activity_at, $4)
                 WHERE id = (SELECT id FROM sessions
                             WHERE user_id = $1 AND platform = $2 AND channel_id = $3
                             ORDER BY last_activity_at DESC LIMIT 1)
                   AND last_activity_at >= $5
                 RETURNING id, started_at",
            )
            .await?,
            &[&user_id, &platform.as_str(), &channel_id, &now, &cutoff],
        )
        .await?;
    if let Some(row) = continued {
        return Ok(Session {
            id: row.get(0),
            started_at: row.get(1),
            is_new: false,
        });
    }
    let id = SessionId::new();
    tx.execute(
        &crate::stmt(
            tx,
            "INSERT INTO sessions (id, user_id, platform, channel_id, started_at, last_activity_at)
         VALUES ($1, $2, $3, $4, $5, $5)",
        )
        .await?,
        &[&id, &user_id, &platform.as_str(), &channel_id, &now],
    )
    .await?;
    Ok(Session {
        id,
        started_at: now,
        is_new: true,
    })
}

/// Record activity on a session at `now` (when its answer is logged). Activity never moves
/// backwards: replicas' clocks differ slightly and a late writer must not shorten a session.
/// A session that a newer one of its scope replaced is left alone: the late answer of a
/// session that is over must not make it the latest again and pull the conversation back
/// into it (docs/security.md, "Conversations and tools").
pub async fn touch(
    client: &impl GenericClient,
    session_id: SessionId,
    now: DateTime<Utc>,
) -> Result<(), DbError> {
    client
        .execute(
            &crate::stmt(
                client,
                "UPDATE sessions s SET last_activity_at = GREATEST(s.last_activity_at, $2)
                 WHERE s.id = $1
                   AND NOT EXISTS (SELECT 1 FROM sessions newer
                                   WHERE newer.user_id = s.user_id AND newer.platform = s.platform
                                     AND newer.channel_id = s.channel_id
                                     AND newer.started_at > s.started_at)",
            )
            .await?,
            &[&session_id, &now],
        )
        .await?;
    Ok(())
}

/// The last `max_turns` messages of a session, oldest first, as chat turns: what the Redis
/// history is rebuilt from after a miss.
pub async fn history(
    client: &impl GenericClient,
    session_id: SessionId,
    max_turns: usize,
) -> Result<Vec<ChatMessage>, DbError> {
    let limit = i64::try_from(max_turns).unwrap_or(i64::MAX);
    // Ordered by id, not created_at: created_at is the transaction's start, and the id is
    // the order the messages were actually logged in.
    let rows = client
        .query(
            &crate::stmt(
                client,
                "SELECT direction, text FROM (
                 SELECT id, direction, text FROM interactions
                 WHERE session_id = $1 ORDER BY id DESC LIMIT $2
             ) recent ORDER BY id",
            )
            .await?,
            &[&session_id, &limit],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let direction = Direction::parse(r.get(0))?;
            Some(ChatMessage::text(direction.role(), r.get::<_, String>(1)))
        })
        .collect())
}

/// The user's last `limit` messages from sessions other than `current_session` (any
/// platform), newest first, with when they were received: cross-session context, so the
/// assistant can refer to what the user said elsewhere without replaying those histories.
pub async fn recent_inbound_elsewhere(
    client: &impl GenericClient,
    user_id: UserId,
    current_session: SessionId,
    limit: i64,
) -> Result<Vec<(String, DateTime<Utc>)>, DbError> {
    let rows = client
        .query(
            &crate::stmt(
                client,
                "SELECT text, created_at FROM interactions
             WHERE user_id = $1 AND direction = 'inbound' AND session_id <> $2
             ORDER BY created_at DESC, id DESC LIMIT $3",
            )
            .await?,
            &[&user_id, &current_session, &limit.max(0)],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// Sessions with activity within `idle` of `now`: the conversations still open, which the
/// next message continues rather than starting anew (for `GET /health/detailed`).
pub async fn count_open(
    client: &impl GenericClient,
    now: DateTime<Utc>,
    idle: Duration,
) -> Result<i64, DbError> {
    let cutoff = idle_cutoff(now, idle);
    let row = client
        .query_one(
            "SELECT count(*) FROM sessions WHERE last_activity_at >= $1",
            &[&cutoff],
        )
        .await?;
    Ok(row.get(0))
}

/// The oldest activity that still counts as live; an idle timeout too large for chrono means
/// sessions never expire.
/// The session of an OpenAI-compatible API message that can be continued (docs/api.md,
/// "Responses"): `continued`, carried on at `now` however long it has been idle, when it
/// is an API session of `key`; otherwise a new one, named by `channel_id` (the run that
/// opens it). API sessions have no user: callers bring their own conversation, and the
/// session is what makes a chain of responses one conversation to operators.
pub async fn api_session(
    tx: &Transaction<'_>,
    key: Option<ApiKeyId>,
    continued: Option<SessionId>,
    channel_id: &str,
    now: DateTime<Utc>,
) -> Result<Session, DbError> {
    if let Some(id) = continued {
        let row = tx
            .query_opt(
                &crate::stmt(
                    tx,
                    "UPDATE sessions SET last_activity_at = GREATEST(last_activity_at, $3)
                     WHERE id = $1 AND user_id IS NULL AND platform = 'api'
                       AND api_key_id IS NOT DISTINCT FROM $2
                     RETURNING started_at",
                )
                .await?,
                &[&id, &key, &now],
            )
            .await?;
        if let Some(row) = row {
            return Ok(Session {
                id,
                started_at: row.get(0),
                is_new: false,
            });
        }
    }
    let id = SessionId::new();
    tx.execute(
        &crate::stmt(
            tx,
            "INSERT INTO sessions (id, user_id, api_key_id, platform, channel_id, started_at,
                                   last_activity_at)
             VALUES ($1, NULL, $2, 'api', $3, $4, $4)",
        )
        .await?,
        &[&id, &key, &channel_id, &now],
    )
    .await?;
    Ok(Session {
        id,
        started_at: now,
        is_new: true,
    })
}

fn idle_cutoff(now: DateTime<Utc>, idle: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(idle)
        .ok()
        .and_then(|idle| now.checked_sub_signed(idle))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

#[cfg(test)]
mod tests;
