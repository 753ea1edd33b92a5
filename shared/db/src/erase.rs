//! Erasing a person (`docs/security.md`, "Erasing a person"): every row PostgreSQL holds
//! about one user, table by table, for `hermes users erase`. The runs and statuses of the
//! platform senders linked to the user go too, also those from before the link. Each step is
//! its own statement, so nothing is locked for long, and the whole is safe to run again
//! after an interruption. Published `outbox` rows (message copies) are not per user: the
//! relay deletes them after 3 days whoever they were for.

use hermes_types::ids::{RunId, UserId};

use crate::{Client, DbError};

/// Who is erased: the user and what points at them from outside PostgreSQL's foreign keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub user: UserId,
    /// `(platform, sender_id)` of every linked channel.
    pub channels: Vec<(String, String)>,
    /// `(platform, channel_id)` of every session (the history cache is keyed by them).
    pub scopes: Vec<(String, String)>,
    /// Their runs and their senders' (the run event streams in Redis are keyed by them):
    /// read before the rows go, so the streams can be found.
    pub runs: Vec<RunId>,
}

/// The runs of the subject: its own, and its senders'.
const RUNS: &str = "SELECT r.id FROM agent_runs r WHERE r.user_id = $1 OR EXISTS \
     (SELECT 1 FROM user_channels c WHERE c.user_id = $1 \
      AND c.platform = r.platform AND c.sender_id = r.sender_id)";

/// Each step: the table, and a statement over `$1` (the user) that deletes its rows.
fn steps() -> Vec<(&'static str, String)> {
    vec![
        (
            "webhook_deliveries",
            format!("DELETE FROM webhook_deliveries WHERE run_id IN ({RUNS})"),
        ),
        (
            "activity_events",
            format!("DELETE FROM activity_events WHERE user_id = $1 OR run_id IN ({RUNS})"),
        ),
        (
            "message_statuses",
            "DELETE FROM message_statuses s USING user_channels c \
             WHERE c.user_id = $1 AND s.platform = c.platform AND s.recipient_id = c.sender_id"
                .into(),
        ),
        (
            "platform_sends",
            format!("DELETE FROM platform_sends WHERE run_id IN ({RUNS})"),
        ),
        (
            "platform_send_replies",
            format!("DELETE FROM platform_send_replies WHERE run_id IN ({RUNS})"),
        ),
        (
            "burst_messages",
            "DELETE FROM burst_messages s USING user_channels c \
             WHERE c.user_id = $1 AND s.platform = c.platform AND s.sender_id = c.sender_id"
                .into(),
        ),
        (
            "agent_runs",
            format!("DELETE FROM agent_runs WHERE id IN ({RUNS})"),
        ),
        (
            "llm_token_usage",
            "DELETE FROM llm_token_usage WHERE user_id = $1".into(),
        ),
        (
            "interactions",
            "DELETE FROM interactions WHERE user_id = $1".into(),
        ),
        ("sessions", "DELETE FROM sessions WHERE user_id = $1".into()),
        (
            "user_memory",
            "DELETE FROM user_memory WHERE user_id = $1".into(),
        ),
        (
            "user_insights",
            "DELETE FROM user_insights WHERE user_id = $1".into(),
        ),
        (
            "user_dreams",
            "DELETE FROM user_dreams WHERE user_id = $1".into(),
        ),
        (
            "credit_ledger",
            "DELETE FROM credit_ledger WHERE user_id = $1".into(),
        ),
        (
            "whatsapp_windows",
            "DELETE FROM whatsapp_windows WHERE chat_id IN (SELECT sender_id FROM user_channels \
             WHERE user_id = $1 AND platform = 'whatsapp')"
                .into(),
        ),
        (
            "messenger_windows",
            "DELETE FROM messenger_windows WHERE chat_id IN (SELECT sender_id FROM user_channels \
             WHERE user_id = $1 AND platform = 'messenger')"
                .into(),
        ),
        (
            "user_channels",
            "DELETE FROM user_channels WHERE user_id = $1".into(),
        ),
        ("users", "DELETE FROM users WHERE id = $1".into()),
    ]
}

/// The subject `user`, or `None` when there is no such user.
pub async fn subject(client: &Client, user: UserId) -> Result<Option<Subject>, DbError> {
    if client
        .query_opt("SELECT 1 FROM users WHERE id = $1", &[&user])
        .await?
        .is_none()
    {
        return Ok(None);
    }
    let pairs = |rows: Vec<tokio_postgres::Row>| -> Vec<(String, String)> {
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    };
    let channels = client
        .query(
            "SELECT platform, sender_id FROM user_channels WHERE user_id = $1 ORDER BY id",
            &[&user],
        )
        .await?;
    let scopes = client
        .query(
            "SELECT DISTINCT platform, channel_id FROM sessions WHERE user_id = $1",
            &[&user],
        )
        .await?;
    let runs = client
        .query(RUNS, &[&user])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(Some(Subject {
        user,
        channels: pairs(channels),
        scopes: pairs(scopes),
        runs,
    }))
}

/// How many rows each table holds about `user` (what an erase would remove).
pub async fn count(client: &Client, user: UserId) -> Result<Vec<(&'static str, u64)>, DbError> {
    let mut counts = Vec::new();
    for (table, delete) in steps() {
        // The same condition as the step's, counted instead of deleted.
        let select = delete.replacen("DELETE FROM", "SELECT count(*) FROM", 1);
        let select = select.replacen(
            " s USING user_channels c WHERE",
            " s, user_channels c WHERE",
            1,
        );
        let n: i64 = client.query_one(&select, &[&user]).await?.get(0);
        counts.push((table, n as u64));
    }
    Ok(counts)
}

/// Delete every row about `user`, table by table, telling `progress` each table's count as
/// it is done. Returns the counts.
pub async fn erase(
    client: &Client,
    user: UserId,
    mut progress: impl FnMut(&'static str, u64),
) -> Result<Vec<(&'static str, u64)>, DbError> {
    let mut done = Vec::new();
    for (table, delete) in steps() {
        let n = client.execute(&delete, &[&user]).await?;
        progress(table, n);
        done.push((table, n));
    }
    Ok(done)
}
