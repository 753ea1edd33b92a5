//! The runs the console lists (docs/console.md, "Pages"): newest first, filtered by status,
//! platform, a chat, a user, an agent and a time range, paged by the last id shown. A chat's,
//! a user's and an agent's runs are read through their indexes, a time range through the
//! index of runs by time (migrations 0040 and 0041).

use chrono::{DateTime, Utc};
use hermes_types::ids::{AgentId, UserId};
use hermes_types::model::Platform;

use crate::{Client, DbError};

/// What to list.
#[derive(Clone, Debug, Default)]
pub struct RunSearch<'a> {
    pub status: Option<&'a str>,
    pub platform: Option<Platform>,
    /// A chat id, matched exactly.
    pub chat: Option<&'a str>,
    pub user: Option<UserId>,
    pub agent: Option<AgentId>,
    /// Runs that started at or after this time.
    pub since: Option<DateTime<Utc>>,
    /// Runs that started before this time.
    pub until: Option<DateTime<Utc>>,
    /// Only runs whose id sorts below this one (the last one of the page before).
    pub before: Option<uuid::Uuid>,
    pub limit: i64,
}

/// One listed run.
#[derive(Clone, Debug)]
pub struct Listed {
    pub id: uuid::Uuid,
    pub created_at: DateTime<Utc>,
    pub platform: Option<String>,
    pub status: String,
    pub model: Option<String>,
    pub tokens: i64,
    pub cost_micro_usd: i64,
}

/// The runs `s` names, newest first, at most `s.limit`.
pub async fn search(client: &Client, s: &RunSearch<'_>) -> Result<Vec<Listed>, DbError> {
    // Not a cached statement: after five runs PostgreSQL may keep one generic plan, which
    // cannot know which filters are NULL and so would scan the primary key for a user's runs.
    // An unnamed statement is planned for its values, using the index the filters call for.
    let sql =
        "SELECT id, created_at, platform, status, model, tokens_in + tokens_out, cost_micro_usd
               FROM agent_runs
               WHERE ($1::text IS NULL OR status = $1)
                 AND ($2::text IS NULL OR platform = $2)
                 AND ($3::text IS NULL OR chat_id = $3)
                 AND ($4::uuid IS NULL OR id < $4)
                 AND ($5::uuid IS NULL OR user_id = $5)
                 AND ($6::uuid IS NULL OR agent_id = $6)
                 AND ($7::timestamptz IS NULL OR created_at >= $7)
                 AND ($8::timestamptz IS NULL OR created_at < $8)
               ORDER BY id DESC
               LIMIT $9";
    let rows = client
        .query(
            sql,
            &[
                &s.status,
                &s.platform.map(Platform::as_str),
                &s.chat,
                &s.before,
                &s.user,
                &s.agent,
                &s.since,
                &s.until,
                &s.limit,
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Listed {
            id: r.get(0),
            created_at: r.get(1),
            platform: r.get(2),
            status: r.get(3),
            model: r.get(4),
            tokens: r.get(5),
            cost_micro_usd: r.get(6),
        })
        .collect())
}
