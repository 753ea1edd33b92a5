//! The ledger of one run: what reached the fake platform, what the database holds, what the
//! broker parked. A run whose ledger does not add up is void.

use std::collections::HashMap;
use std::fmt;

use hermes_bus::{Bus, Stage};
use hermes_db::Db;

use super::load::{Seen, token};

/// What one run left behind.
#[derive(Debug, Default)]
pub struct Ledger {
    pub messages: usize,
    pub answered: usize,
    pub lost: usize,
    pub doubled: usize,
    pub failure_replies: usize,
    /// The failure replies' texts, most frequent first.
    pub failure_texts: Vec<(String, usize)>,
    pub runs: i64,
    pub duplicate_runs: i64,
    pub open_runs: i64,
    pub failed_runs: i64,
    pub charges: i64,
    pub parked: u64,
}

async fn count(db: &Db, sql: &str) -> anyhow::Result<i64> {
    let c = db.get().await?;
    Ok(c.query_one(sql, &[])
        .await?
        .get::<_, Option<i64>>(0)
        .unwrap_or(0))
}

impl Ledger {
    pub async fn read(messages: usize, seen: &Seen, db: &Db, bus: &Bus) -> anyhow::Result<Self> {
        let mut per_token: HashMap<String, usize> = HashMap::new();
        let mut failure_replies = 0;
        let mut texts: HashMap<String, usize> = HashMap::new();
        for (_, text) in seen.sends.lock().map(|s| s.clone()).unwrap_or_default() {
            match text.split_whitespace().find(|w| w.starts_with("ledger-")) {
                Some(t) if text.starts_with("echo: ") => {
                    *per_token.entry(t.to_string()).or_insert(0) += 1;
                }
                _ => {
                    failure_replies += 1;
                    *texts.entry(text.chars().take(120).collect()).or_insert(0) += 1;
                }
            }
        }
        let answered = (0..messages)
            .filter(|i| per_token.contains_key(&token(*i)))
            .count();
        let mut parked = 0u64;
        for stage in Stage::ALL {
            if let Ok((n, _)) = bus.queue_stats(&bus.names().parking(stage)).await {
                parked += u64::from(n);
            }
        }
        let mut failure_texts: Vec<_> = texts.into_iter().collect();
        failure_texts.sort_by_key(|t| std::cmp::Reverse(t.1));
        Ok(Self {
            messages,
            failure_texts,
            answered,
            lost: messages - answered,
            doubled: per_token.values().filter(|n| **n > 1).count(),
            failure_replies,
            runs: count(db, "SELECT count(*) FROM agent_runs").await?,
            duplicate_runs: count(
                db,
                "SELECT coalesce(sum(n - 1), 0)::bigint FROM
                   (SELECT count(*) AS n FROM agent_runs GROUP BY input_text HAVING count(*) > 1) d",
            )
            .await?,
            open_runs: count(
                db,
                "SELECT count(*) FROM agent_runs WHERE status NOT IN ('completed', 'failed')",
            )
            .await?,
            failed_runs: count(db, "SELECT count(*) FROM agent_runs WHERE status = 'failed'")
                .await?,
            charges: count(db, "SELECT count(*) FROM credit_ledger WHERE reason = 'charge'")
                .await?,
            parked,
        })
    }

    /// Why the run is void, if it is: anything lost, a second run, a failure reply, a parked
    /// message, a run left open, more doubled sends than `max_doubled` allows.
    pub fn problems(&self, max_doubled: f64) -> Vec<String> {
        let mut p = Vec::new();
        if self.lost > 0 {
            p.push(format!("{} messages never answered", self.lost));
        }
        if self.duplicate_runs > 0 {
            p.push(format!("{} duplicate runs", self.duplicate_runs));
        }
        if self.failure_replies > 0 {
            p.push(format!(
                "{} failure replies instead of answers ({:?})",
                self.failure_replies, self.failure_texts
            ));
        }
        if self.parked > 0 {
            p.push(format!("{} messages parked", self.parked));
        }
        if self.open_runs > 0 {
            p.push(format!("{} runs left open", self.open_runs));
        }
        if self.charges != self.runs - self.failed_runs && self.failed_runs == 0 {
            p.push(format!("{} charges for {} runs", self.charges, self.runs));
        }
        let share = 100.0 * self.doubled as f64 / self.messages.max(1) as f64;
        if share > max_doubled {
            p.push(format!(
                "{} doubled sends ({share:.2} %, more than {max_doubled} %)",
                self.doubled
            ));
        }
        p
    }
}

impl fmt::Display for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "messages {} | answered {} | lost {} | duplicate runs {} | doubled sends {} | failure replies {} | parked {} | open runs {}",
            self.messages,
            self.answered,
            self.lost,
            self.duplicate_runs,
            self.doubled,
            self.failure_replies,
            self.parked,
            self.open_runs
        )
    }
}
