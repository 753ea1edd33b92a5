//! The last hour of runs as the console's overview draws it (docs/console.md, "Pages"):
//! runs per minute by platform, and the time to answer per five minutes. Read through the
//! index of runs by time (migration 0040), so the page costs the hour's rows, never the
//! table.

use crate::{Client, DbError, stmt};
use chrono::{DateTime, Utc};
use hermes_types::model::Platform;

/// How far back the overview looks, in minutes.
pub const MINUTES: i32 = 60;

/// The width of one latency bucket, in minutes.
pub const LATENCY_BUCKET_MINUTES: i32 = 5;

/// Runs that started in one minute on one platform.
#[derive(Clone, Debug, PartialEq)]
pub struct MinuteCount {
    /// Whole minutes before `now` (0 = the last minute).
    pub minutes_ago: i32,
    /// The platform; `None` for runs with no platform (jobs, agent-to-agent).
    pub platform: Option<Platform>,
    pub runs: i64,
}

/// The time to answer of the runs completed in one bucket, or over the whole hour.
#[derive(Clone, Debug, PartialEq)]
pub struct Latency {
    /// Buckets before `now` (0 = the last [`LATENCY_BUCKET_MINUTES`]); `None` for the hour.
    pub buckets_ago: Option<i32>,
    pub answered: i64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The hour before `now`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Activity {
    pub per_minute: Vec<MinuteCount>,
    pub latency: Vec<Latency>,
}

/// [`Activity`] of the hour before `now`.
pub async fn last_hour(client: &Client, now: DateTime<Utc>) -> Result<Activity, DbError> {
    let since = now - chrono::Duration::minutes(i64::from(MINUTES));
    let per_minute = client
        .query(
            &stmt(
                client,
                "SELECT floor(extract(epoch FROM ($2 - created_at)) / 60)::int, platform, count(*)
                 FROM agent_runs WHERE created_at > $1 AND created_at <= $2
                 GROUP BY 1, 2",
            )
            .await?,
            &[&since, &now],
        )
        .await?
        .iter()
        .map(|r| MinuteCount {
            minutes_ago: r.get(0),
            platform: r.get::<_, Option<&str>>(1).and_then(Platform::parse),
            runs: r.get(2),
        })
        .collect();
    // One scan: each bucket, and the hour as a whole (the empty grouping set).
    let latency = client
        .query(
            &stmt(
                client,
                "SELECT floor(extract(epoch FROM ($2 - created_at)) / ($3::int * 60))::int, count(*),
                        (extract(epoch FROM percentile_cont(0.5)
                            WITHIN GROUP (ORDER BY finished_at - created_at)) * 1000)::float8,
                        (extract(epoch FROM percentile_cont(0.99)
                            WITHIN GROUP (ORDER BY finished_at - created_at)) * 1000)::float8
                 FROM agent_runs
                 WHERE created_at > $1 AND created_at <= $2
                   AND status = 'completed' AND finished_at IS NOT NULL
                 GROUP BY GROUPING SETS ((1), ())",
            )
            .await?,
            &[&since, &now, &LATENCY_BUCKET_MINUTES],
        )
        .await?
        .iter()
        .map(|r| Latency {
            buckets_ago: r.get(0),
            answered: r.get(1),
            // The hour's row exists with no run in it, its percentiles NULL.
            p50_ms: r.get::<_, Option<f64>>(2).unwrap_or(0.0),
            p99_ms: r.get::<_, Option<f64>>(3).unwrap_or(0.0),
        })
        .collect();
    Ok(Activity {
        per_minute,
        latency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scratch::ScratchDb;

    /// A run on `platform` that started `ago_secs` before `now` and, when `took_ms` is given,
    /// completed that long after.
    async fn run(
        c: &Client,
        now: DateTime<Utc>,
        platform: &str,
        ago_secs: i64,
        took_ms: Option<i64>,
    ) {
        let created = now - chrono::Duration::seconds(ago_secs);
        let finished = took_ms.map(|ms| created + chrono::Duration::milliseconds(ms));
        let status = if took_ms.is_some() {
            "completed"
        } else {
            "running"
        };
        c.execute(
            "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier, created_at, finished_at)
             VALUES (gen_random_uuid(), $1, 's', 'c', $2, 'free', $3, $4)",
            &[&platform, &status, &created, &finished],
        )
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn an_hour_without_runs_reads_as_nothing_answered() {
        ScratchDb::with(|db| async move {
            let c = db.get().await.unwrap();
            let a = last_hour(&c, Utc::now()).await.unwrap();
            assert!(a.per_minute.is_empty());
            let hour = a.latency.iter().find(|l| l.buckets_ago.is_none()).unwrap();
            assert_eq!((hour.answered, hour.p50_ms), (0, 0.0));
        })
        .await;
    }

    #[tokio::test]
    async fn the_last_hour_counts_runs_per_minute_and_platform_and_their_time_to_answer() {
        ScratchDb::with(|db| async move {
            let c = db.get().await.unwrap();
            let now = Utc::now();
            run(&c, now, "telegram", 10, Some(1_000)).await;
            run(&c, now, "telegram", 20, Some(3_000)).await;
            run(&c, now, "slack", 30, None).await;
            run(&c, now, "telegram", 61 * 60, Some(9_000)).await; // before the hour
            run(&c, now, "telegram", 7 * 60, Some(2_000)).await;
            let a = last_hour(&c, now).await.unwrap();
            let mut per_minute = a.per_minute.clone();
            per_minute.sort_by_key(|m| (m.minutes_ago, m.platform.map(|p| p.as_str())));
            assert_eq!(
                per_minute,
                vec![
                    MinuteCount {
                        minutes_ago: 0,
                        platform: Some(Platform::Slack),
                        runs: 1
                    },
                    MinuteCount {
                        minutes_ago: 0,
                        platform: Some(Platform::Telegram),
                        runs: 2
                    },
                    MinuteCount {
                        minutes_ago: 7,
                        platform: Some(Platform::Telegram),
                        runs: 1
                    },
                ]
            );
            let hour = a.latency.iter().find(|l| l.buckets_ago.is_none()).unwrap();
            assert_eq!(hour.answered, 3);
            assert_eq!(hour.p50_ms, 2_000.0);
            let first = a.latency.iter().find(|l| l.buckets_ago == Some(0)).unwrap();
            assert_eq!((first.answered, first.p50_ms), (2, 2_000.0));
            let second = a.latency.iter().find(|l| l.buckets_ago == Some(1)).unwrap();
            assert_eq!((second.answered, second.p99_ms), (1, 2_000.0));
        })
        .await;
    }
}
