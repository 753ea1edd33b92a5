//! The dreaming engine's rows (docs/models-and-budgets.md, "The dreaming engine"): who is
//! due a dream once an ISO week is over, what a dream reads (the week's messages, the
//! user's memory), and the insight and knowledge gaps it writes. `user_dreams` holds one row
//! per user and week: its primary key makes a week dreamt once whichever replica looks and
//! however often, and a dream writes only while its row is still `queued`.

use chrono::{DateTime, Utc};
use hermes_types::ids::UserId;
use hermes_types::model::Tier;
use uuid::Uuid;

use super::{DbError, GenericClient, Transaction, stmt};

/// Most memory rows a dream reads: every structural key fits, then the newest facts.
pub const MEMORY_ROWS: i64 = 60;

/// Mark up to `limit` users who sent a message in the week from `week_start` (7 days) and
/// have no dream for it as `queued`, in the caller's transaction; returns each with their
/// tier. A user another replica queued meanwhile is skipped by the primary key, so each
/// user and week is returned once, ever.
pub async fn queue_week(
    tx: &Transaction<'_>,
    week_start: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<(UserId, Tier)>, DbError> {
    let sql = "WITH talked AS (
                   SELECT DISTINCT i.user_id FROM interactions i
                    WHERE i.direction = 'inbound'
                      AND i.created_at >= $1 AND i.created_at < $1 + interval '7 days'
                      AND NOT EXISTS (SELECT 1 FROM user_dreams d
                                       WHERE d.user_id = i.user_id AND d.week_start = $1)
                    LIMIT $2
               ), queued AS (
                   INSERT INTO user_dreams (user_id, week_start)
                   SELECT user_id, $1 FROM talked
                   ON CONFLICT DO NOTHING
                   RETURNING user_id
               )
               SELECT q.user_id, u.tier FROM queued q JOIN users u ON u.id = q.user_id";
    let rows = tx
        .query(&stmt(tx, sql).await?, &[&week_start, &limit])
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let tier: String = r.get(1);
            (
                UserId::from(r.get::<_, Uuid>(0)),
                tier.parse().unwrap_or(Tier::Free),
            )
        })
        .collect())
}

/// Whether the week's dream of `user_id` is still to be written (false: written, given up,
/// or the user erased): a dream that is not calls no model.
pub async fn is_queued(
    c: &impl GenericClient,
    user_id: UserId,
    week_start: DateTime<Utc>,
) -> Result<bool, DbError> {
    let sql = "SELECT 1 FROM user_dreams
                WHERE user_id = $1 AND week_start = $2 AND status = 'queued'";
    Ok(c.query_opt(&stmt(c, sql).await?, &[&user_id, &week_start])
        .await?
        .is_some())
}

/// One message of the week, as a dream reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The user's message (else the answer they got).
    pub inbound: bool,
    /// As stored: user text, never for logs.
    pub text: String,
}

/// The newest `max_turns` messages of `user_id` in the week from `week_start`, oldest first.
pub async fn week_turns(
    c: &impl GenericClient,
    user_id: UserId,
    week_start: DateTime<Utc>,
    max_turns: i64,
) -> Result<Vec<Turn>, DbError> {
    let sql = "SELECT direction = 'inbound', text FROM (
                   SELECT id, direction, text FROM interactions
                    WHERE user_id = $1 AND created_at >= $2 AND created_at < $2 + interval '7 days'
                    ORDER BY id DESC LIMIT $3
               ) t ORDER BY id";
    let rows = c
        .query(&stmt(c, sql).await?, &[&user_id, &week_start, &max_turns])
        .await?;
    Ok(rows
        .iter()
        .map(|r| Turn {
            inbound: r.get(0),
            text: r.get(1),
        })
        .collect())
}

/// The user's memory as `(key, value)`: structural keys first, then the newest facts, at
/// most [`MEMORY_ROWS`].
pub async fn memory_rows(
    c: &impl GenericClient,
    user_id: UserId,
) -> Result<Vec<(String, String)>, DbError> {
    let sql = "SELECT key, value FROM user_memory WHERE user_id = $1
                ORDER BY structural DESC, updated_at DESC LIMIT $2";
    let rows = c
        .query(&stmt(c, sql).await?, &[&user_id, &MEMORY_ROWS])
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// What a dream came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// One insight and at most 3 knowledge gaps.
    Written { insight: String, gaps: Vec<String> },
    /// The model answered without an insight.
    Empty,
    /// The call failed, timed out or was refused.
    Failed,
}

impl Outcome {
    /// The `user_dreams.status` and metric label.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Written { .. } => "written",
            Outcome::Empty => "empty",
            Outcome::Failed => "failed",
        }
    }
}

/// Close the week's dream of `user_id` with `outcome` and the tokens it used, writing its
/// insight and gaps, only while it is `queued`: whether it was. A second dream of the same
/// week (a redelivery, a replayed message) writes nothing, and neither does a dream of a
/// user erased meanwhile (the row went with them).
pub async fn finish(
    c: &impl GenericClient,
    user_id: UserId,
    week_start: DateTime<Utc>,
    outcome: &Outcome,
    tokens: (u64, u64),
) -> Result<bool, DbError> {
    let sql = "UPDATE user_dreams
                  SET status = $3, input_tokens = $4, output_tokens = $5, finished_at = now()
                WHERE user_id = $1 AND week_start = $2 AND status = 'queued'";
    let (input, output) = (tokens.0 as i64, tokens.1 as i64);
    let closed = c
        .execute(
            &stmt(c, sql).await?,
            &[&user_id, &week_start, &outcome.as_str(), &input, &output],
        )
        .await?
        > 0;
    if let (true, Outcome::Written { insight, gaps }) = (closed, outcome) {
        let mut kinds = vec!["insight"];
        let mut texts = vec![insight.as_str()];
        for g in gaps {
            kinds.push("knowledge_gap");
            texts.push(g.as_str());
        }
        let sql = "INSERT INTO user_insights (user_id, kind, text, week_start)
                   SELECT $1, k, t, $2 FROM UNNEST($3::text[], $4::text[]) AS x(k, t)";
        c.execute(
            &stmt(c, sql).await?,
            &[&user_id, &week_start, &kinds, &texts],
        )
        .await?;
    }
    Ok(closed)
}
