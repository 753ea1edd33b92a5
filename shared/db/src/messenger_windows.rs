//! Messenger's standard messaging window (`messenger_windows`, docs/channels.md, "Facebook
//! Messenger"): Meta accepts a `RESPONSE` to a person only within 24 hours of their last
//! message. The router records each message in the transaction that creates its run
//! ([`record`]); delivery reads the chat's row before it sends ([`last_inbound_at`]).

use chrono::{DateTime, Utc};

use super::{DbError, GenericClient, stmt};

/// Record a message the person of `chat_id` sent at `at`: the window runs from the latest one
/// (a redelivered older message never moves it back).
pub async fn record(
    c: &impl GenericClient,
    chat_id: &str,
    at: DateTime<Utc>,
) -> Result<(), DbError> {
    let sql = "INSERT INTO messenger_windows AS w (chat_id, last_inbound_at) VALUES ($1, $2)
               ON CONFLICT (chat_id) DO UPDATE
                  SET last_inbound_at = GREATEST(w.last_inbound_at, EXCLUDED.last_inbound_at)";
    c.execute(&stmt(c, sql).await?, &[&chat_id, &at]).await?;
    Ok(())
}

/// When the person of `chat_id` last wrote; `None` when they never did (or were erased).
pub async fn last_inbound_at(
    c: &impl GenericClient,
    chat_id: &str,
) -> Result<Option<DateTime<Utc>>, DbError> {
    let sql = "SELECT last_inbound_at FROM messenger_windows WHERE chat_id = $1";
    let row = c.query_opt(&stmt(c, sql).await?, &[&chat_id]).await?;
    Ok(row.map(|r| r.get(0)))
}
