//! WhatsApp's customer-service window (`whatsapp_windows`, docs/channels.md, "WhatsApp's
//! window and templates"): Meta accepts free text to a user only within 24 hours of that
//! user's last message (the rule is `hermes_channels::whatsapp::window`; this is its row).
//! The router records each user message in the transaction that creates
//! its run ([`record`]); delivery reads the chat's row by key before it sends ([`read`]).

use chrono::{DateTime, Utc};

use super::{DbError, GenericClient, stmt};

/// A chat's window as last recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// When the user last wrote (the platform's timestamp of their message).
    pub last_inbound_at: DateTime<Utc>,
    /// The profile name they last wrote under, if the platform told it.
    pub user_name: Option<String>,
}

/// Record a message the user of `chat_id` sent at `at`: the window runs from the latest one
/// (a redelivered older message never moves it back), and the name is kept when a message
/// comes without one.
pub async fn record(
    c: &impl GenericClient,
    chat_id: &str,
    at: DateTime<Utc>,
    user_name: Option<&str>,
) -> Result<(), DbError> {
    c.execute(
        &stmt(
            c,
            "INSERT INTO whatsapp_windows AS w (chat_id, last_inbound_at, user_name)
             VALUES ($1, $2, $3)
             ON CONFLICT (chat_id) DO UPDATE
                SET last_inbound_at = GREATEST(w.last_inbound_at, EXCLUDED.last_inbound_at),
                    user_name = COALESCE(EXCLUDED.user_name, w.user_name)",
        )
        .await?,
        &[&chat_id, &at, &user_name],
    )
    .await?;
    Ok(())
}

/// The window of `chat_id`; `None` when its user never wrote (or was erased).
pub async fn read(c: &impl GenericClient, chat_id: &str) -> Result<Option<Window>, DbError> {
    let row = c
        .query_opt(
            &stmt(
                c,
                "SELECT last_inbound_at, user_name FROM whatsapp_windows WHERE chat_id = $1",
            )
            .await?,
            &[&chat_id],
        )
        .await?;
    Ok(row.map(|r| Window {
        last_inbound_at: r.get(0),
        user_name: r.get(1),
    }))
}
