//! The ledger of one run: what reached the fake platform, what the database holds, what the
//! broker parked. A run whose ledger does not add up is void.

use std::collections::HashMap;
use std::fmt;

use hermes_bus::{Bus, Stage};
use hermes_db::Db;

use super::load::{Seen, is_api, token};
use super::model::Calls;

/// What one run left behind.
#[derive(Debug, Default)]
pub struct Ledger {
    pub messages: usize,
    /// Chat messages and API calls answered with their echo.
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
    /// Chat runs not failed: each is charged once (API runs are not charged).
    pub chat_runs: i64,
    pub parked: u64,
    /// Model calls in all, and calls (a message's answer or its memory extraction) made more
    /// than once.
    pub model_calls: usize,
    pub repeated_model_calls: usize,
    /// API calls: sent, refused (not taken, the caller knows), streams cut before their end,
    /// and answers that were not the echo of their message.
    pub api_sent: usize,
    pub api_refused: usize,
    pub api_cut: usize,
    pub api_wrong: usize,
}

async fn count(db: &Db, sql: &str) -> anyhow::Result<i64> {
    let c = db.get().await?;
    Ok(c.query_one(sql, &[])
        .await?
        .get::<_, Option<i64>>(0)
        .unwrap_or(0))
}

impl Ledger {
    pub async fn read(
        messages: usize,
        api_every: usize,
        seen: &Seen,
        calls: &Calls,
        db: &Db,
        bus: &Bus,
    ) -> anyhow::Result<Self> {
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
        let chats = (0..messages).filter(|i| !is_api(*i, api_every));
        let chat_answered = chats
            .clone()
            .filter(|i| per_token.contains_key(&token(*i)))
            .count();
        let api = &seen.api;
        let load = |n: &std::sync::atomic::AtomicUsize| n.load(std::sync::atomic::Ordering::SeqCst);
        let (api_sent, api_refused) = (load(&api.sent), load(&api.refused));
        let (api_cut, api_wrong) = (load(&api.cut), load(&api.wrong));
        let answered = chat_answered + load(&api.answered);
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
            // Chat messages never answered, and API calls taken whose stream ended without
            // an answer or never ended.
            lost: chats.count() - chat_answered + api_sent
                - api_refused
                - load(&api.answered)
                - api_cut
                - api_wrong,
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
            chat_runs: count(
                db,
                "SELECT count(*) FROM agent_runs WHERE platform <> 'api' AND status <> 'failed'",
            )
            .await?,
            parked,
            model_calls: calls.total(),
            repeated_model_calls: calls.repeated(),
            api_sent,
            api_refused,
            api_cut,
            api_wrong,
        })
    }

    /// Why the run is void, if it is: anything lost, a second run, a failure reply, a parked
    /// message, a run left open, more doubled sends than `max_doubled` allows, and, when every
    /// fault was graceful (`graceful`: stops, no kills or outages), any doubled send or model
    /// call made twice.
    pub fn problems(&self, max_doubled: f64, graceful: bool) -> Vec<String> {
        let mut p = Vec::new();
        if graceful && self.repeated_model_calls > 0 {
            p.push(format!(
                "{} model calls made twice through graceful stops",
                self.repeated_model_calls
            ));
        }
        let max_doubled = if graceful { 0.0 } else { max_doubled };
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
        if self.charges != self.chat_runs {
            p.push(format!(
                "{} charges for {} chat runs",
                self.charges, self.chat_runs
            ));
        }
        if self.api_wrong > 0 {
            p.push(format!(
                "{} API answers were not the echo of their message",
                self.api_wrong
            ));
        }
        if graceful && self.api_cut > 0 {
            p.push(format!(
                "{} API streams cut through graceful stops",
                self.api_cut
            ));
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
            "messages {} | answered {} | lost {} | runs {} ({} failed) | duplicate runs {} | doubled sends {} | model calls {} ({} made twice) | failure replies {} | parked {} | open runs {} | API calls {} (refused {}, streams cut {}, wrong {})",
            self.messages,
            self.answered,
            self.lost,
            self.runs,
            self.failed_runs,
            self.duplicate_runs,
            self.doubled,
            self.model_calls,
            self.repeated_model_calls,
            self.failure_replies,
            self.parked,
            self.open_runs,
            self.api_sent,
            self.api_refused,
            self.api_cut,
            self.api_wrong
        )
    }
}
