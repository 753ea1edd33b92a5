//! Interactions (docs/architecture.md#9-postgresql): every inbound and outbound message of
//! a session, the truth the Redis history cache is rebuilt from, each logged with the
//! `message` event operators' MCP clients read (docs/operator-mcp.md).

use hermes_types::ids::{RunId, SessionId, UserId};
use hermes_types::model::Role;

use super::{DbError, Transaction};

/// Which way a logged message went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the user.
    Inbound,
    /// To the user.
    Outbound,
}

impl Direction {
    /// The value stored in `interactions.direction`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
        }
    }

    /// The direction stored as `s`.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Inbound, Self::Outbound]
            .into_iter()
            .find(|d| d.as_str() == s)
    }

    /// Who wrote a message going this way, as a chat turn.
    pub fn role(self) -> Role {
        match self {
            Direction::Inbound => Role::User,
            Direction::Outbound => Role::Assistant,
        }
    }
}

/// The most characters of a message its `message` event carries (`messages_read` has all).
pub const EVENT_TEXT_CHARS: i32 = 1000;

/// The statement writing the `message` events of the interactions the CTE `cte` returned
/// (`id, run_id, user_id, session_id, direction, text`), their text cut to the parameter
/// `chars` (bound to [`EVENT_TEXT_CHARS`]). Every statement that logs an interaction ends
/// with it, so a message and its event exist together (docs/operator-mcp.md, events).
pub(crate) fn message_events(cte: &str, chars: &str) -> String {
    format!(
        "INSERT INTO events (kind, workspace_id, platform, chat_id, session_id, run_id, body)
         SELECT 'message', u.workspace_id, s.platform, s.channel_id, l.session_id, l.run_id,
                jsonb_build_object('direction', l.direction, 'message_id', l.id,
                  'user_id', l.user_id, 'text', left(l.text, {chars}),
                  'truncated', length(l.text) > {chars})
         FROM {cte} l JOIN sessions s ON s.id = l.session_id
         JOIN users u ON u.id = l.user_id"
    )
}

/// Log one message of run `run_id`. Returns false when that run's message in that
/// direction is already logged: a redelivered message must not appear twice in a history.
pub async fn log_interaction(
    tx: &Transaction<'_>,
    run_id: RunId,
    user_id: UserId,
    session_id: SessionId,
    direction: Direction,
    text: &str,
    meta: &serde_json::Value,
) -> Result<bool, DbError> {
    let n = tx
        .execute(
            &crate::stmt(
                tx,
                // The `message` event of operators' MCP clients (docs/operator-mcp.md) is
                // written with the interaction, so it exists exactly when the message does.
                &format!(
                    "WITH logged AS (
                       INSERT INTO interactions (run_id, user_id, session_id, direction, text, meta)
                       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, direction) DO NOTHING
                       RETURNING id, run_id, user_id, session_id, direction, text)
                     {}",
                    message_events("logged", "$7")
                ),
            )
            .await?,
            &[
                &run_id,
                &user_id,
                &session_id,
                &direction.as_str(),
                &text,
                meta,
                &EVENT_TEXT_CHARS,
            ],
        )
        .await?;
    Ok(n == 1)
}
