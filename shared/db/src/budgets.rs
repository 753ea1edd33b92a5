//! The durable side of spending limits (docs/models-and-budgets.md, where budgets live):
//! settled per-user token usage by UTC day and month, the platform's spend per UTC day in
//! integer micro-dollars, and the killswitch. The gateway writes every settle and spend here
//! as well as to Redis, and reads these rows when Redis cannot answer or has forgotten.
//! Every write is one atomic statement (`INSERT … ON CONFLICT DO UPDATE SET used = used + n`),
//! so concurrent replicas never lose an increment.

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use hermes_types::ids::{ApiKeyId, UserId};

use super::{DbError, GenericClient, stmt};

/// A budget window of one user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// One UTC day.
    Day,
    /// One UTC calendar month.
    Month,
}

impl Window {
    /// The `window_kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Window::Day => "day",
            Window::Month => "month",
        }
    }

    /// The first day of the window holding `day`.
    pub fn starts(self, day: NaiveDate) -> NaiveDate {
        match self {
            Window::Day => day,
            Window::Month => day.with_day(1).expect("every month has a first day"),
        }
    }
}

/// Settled tokens of one user in the day and the month of one date.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokensUsed {
    pub day: u64,
    pub month: u64,
}

/// Add `tokens` settled by `user` on `day` to both its day and its month, in one statement;
/// returns both totals after the addition.
pub async fn add_tokens(
    c: &impl GenericClient,
    user: UserId,
    day: NaiveDate,
    tokens: u64,
) -> Result<TokensUsed, DbError> {
    let n = to_i64(tokens)?;
    let rows = c
        .query(
            &stmt(
                c,
                "INSERT INTO llm_token_usage (user_id, window_kind, starts, used)
                 VALUES ($1, 'day', $2, $4), ($1, 'month', $3, $4)
                 ON CONFLICT (user_id, window_kind, starts)
                 DO UPDATE SET used = llm_token_usage.used + EXCLUDED.used, updated_at = now()
                 RETURNING window_kind, used",
            )
            .await?,
            &[
                &user,
                &Window::Day.starts(day),
                &Window::Month.starts(day),
                &n,
            ],
        )
        .await?;
    Ok(collect(rows))
}

/// Settled tokens of `user` in the day and the month of `day` (zero when none).
pub async fn tokens_used(
    c: &impl GenericClient,
    user: UserId,
    day: NaiveDate,
) -> Result<TokensUsed, DbError> {
    let rows = c
        .query(
            &stmt(
                c,
                "SELECT window_kind, used FROM llm_token_usage
                 WHERE user_id = $1 AND ((window_kind = 'day' AND starts = $2)
                                      OR (window_kind = 'month' AND starts = $3))",
            )
            .await?,
            &[&user, &Window::Day.starts(day), &Window::Month.starts(day)],
        )
        .await?;
    Ok(collect(rows))
}

fn collect(rows: Vec<tokio_postgres::Row>) -> TokensUsed {
    let mut used = TokensUsed::default();
    for row in rows {
        let kind: &str = row.get(0);
        let n = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
        if kind == Window::Day.as_str() {
            used.day = n;
        } else {
            used.month = n;
        }
    }
    used
}

/// Settled usage of one API key in the day and the month of one date.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyUsed {
    pub day_tokens: u64,
    pub month_tokens: u64,
    pub day_micro_usd: u64,
    pub month_micro_usd: u64,
}

/// Add one call's `tokens` and `micro_usd`, settled by `key` on `day`, to its day and month.
pub async fn add_key_usage(
    c: &impl GenericClient,
    key: ApiKeyId,
    day: NaiveDate,
    tokens: u64,
    micro_usd: u64,
) -> Result<(), DbError> {
    c.execute(
        &stmt(
            c,
            "INSERT INTO llm_key_usage (api_key_id, window_kind, starts, tokens, micro_usd)
             VALUES ($1, 'day', $2, $4, $5), ($1, 'month', $3, $4, $5)
             ON CONFLICT (api_key_id, window_kind, starts)
             DO UPDATE SET tokens = llm_key_usage.tokens + EXCLUDED.tokens,
                           micro_usd = llm_key_usage.micro_usd + EXCLUDED.micro_usd,
                           updated_at = now()",
        )
        .await?,
        &[
            &key,
            &Window::Day.starts(day),
            &Window::Month.starts(day),
            &to_i64(tokens)?,
            &to_i64(micro_usd)?,
        ],
    )
    .await?;
    Ok(())
}

/// Settled usage of `key` in the day and the month of `day` (zero when none).
pub async fn key_used(
    c: &impl GenericClient,
    key: ApiKeyId,
    day: NaiveDate,
) -> Result<KeyUsed, DbError> {
    let rows = c
        .query(
            &stmt(
                c,
                "SELECT window_kind, tokens, micro_usd FROM llm_key_usage
                 WHERE api_key_id = $1 AND ((window_kind = 'day' AND starts = $2)
                                         OR (window_kind = 'month' AND starts = $3))",
            )
            .await?,
            &[&key, &Window::Day.starts(day), &Window::Month.starts(day)],
        )
        .await?;
    let mut used = KeyUsed::default();
    for row in rows {
        let tokens = u64::try_from(row.get::<_, i64>(1)).unwrap_or(0);
        let micro = u64::try_from(row.get::<_, i64>(2)).unwrap_or(0);
        if row.get::<_, &str>(0) == Window::Day.as_str() {
            (used.day_tokens, used.day_micro_usd) = (tokens, micro);
        } else {
            (used.month_tokens, used.month_micro_usd) = (tokens, micro);
        }
    }
    Ok(used)
}

/// Add `micro_usd` to the platform's spend of `day`; returns the day's total.
pub async fn add_spend(
    c: &impl GenericClient,
    day: NaiveDate,
    micro_usd: u64,
) -> Result<u64, DbError> {
    let total: i64 = c
        .query_one(
            &stmt(
                c,
                "INSERT INTO llm_daily_spend (day, micro_usd) VALUES ($1, $2)
                 ON CONFLICT (day) DO UPDATE
                 SET micro_usd = llm_daily_spend.micro_usd + EXCLUDED.micro_usd, updated_at = now()
                 RETURNING micro_usd",
            )
            .await?,
            &[&day, &to_i64(micro_usd)?],
        )
        .await?
        .get(0);
    Ok(u64::try_from(total).unwrap_or(0))
}

/// The platform's spend of `day` in micro-dollars (zero when nothing was spent).
pub async fn spend(c: &impl GenericClient, day: NaiveDate) -> Result<u64, DbError> {
    let row = c
        .query_opt(
            &stmt(c, "SELECT micro_usd FROM llm_daily_spend WHERE day = $1").await?,
            &[&day],
        )
        .await?;
    Ok(row.map_or(0, |r| u64::try_from(r.get::<_, i64>(0)).unwrap_or(0)))
}

/// The killswitch when on: since when and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KillswitchOn {
    pub since: DateTime<Utc>,
    pub reason: String,
}

/// The killswitch as stored (`None`: off, or never turned on).
pub async fn killswitch(c: &impl GenericClient) -> Result<Option<KillswitchOn>, DbError> {
    let row = c
        .query_opt(
            &stmt(
                c,
                "SELECT since, reason FROM llm_killswitch WHERE id AND is_on",
            )
            .await?,
            &[],
        )
        .await?;
    Ok(row.map(|r| KillswitchOn {
        since: r.get(0),
        reason: r.get(1),
    }))
}

/// Turn the killswitch on (again: the reason and time are replaced).
pub async fn killswitch_on(c: &impl GenericClient, on: &KillswitchOn) -> Result<(), DbError> {
    c.execute(
        &stmt(
            c,
            "INSERT INTO llm_killswitch (id, is_on, reason, since) VALUES (true, true, $1, $2)
             ON CONFLICT (id) DO UPDATE SET is_on = true, reason = $1, since = $2",
        )
        .await?,
        &[&on.reason, &on.since],
    )
    .await?;
    Ok(())
}

/// Turn the killswitch off; true if it was on.
pub async fn killswitch_off(c: &impl GenericClient) -> Result<bool, DbError> {
    let n = c
        .execute(
            &stmt(
                c,
                "UPDATE llm_killswitch SET is_on = false, since = now() WHERE id AND is_on",
            )
            .await?,
            &[],
        )
        .await?;
    Ok(n > 0)
}

fn to_i64(n: u64) -> Result<i64, DbError> {
    i64::try_from(n).map_err(|_| DbError::Refused(format!("amount {n} out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_month_window_starts_on_its_first_day() {
        let d = NaiveDate::from_ymd_opt(2026, 11, 23).unwrap();
        assert_eq!(Window::Day.starts(d), d);
        assert_eq!(
            Window::Month.starts(d),
            NaiveDate::from_ymd_opt(2026, 11, 1).unwrap()
        );
    }
}
