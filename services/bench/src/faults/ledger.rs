//! The ledger of one run: what reached the fake platform and the API callers, what the
//! database holds, what the broker parked, what the fake model was asked. A run whose ledger
//! does not add up is void (docs/faults.md).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

use hermes_bus::{Bus, Stage};
use hermes_db::Db;
use hermes_types::model::Platform;

use super::load::{Mix, Path, Seen, is_capped, token};
use super::model::Calls;

/// The start of the refusal a user whose daily budget is spent reads.
const BUDGET_REFUSAL: &str = "You've reached today's usage limit";

/// What one run left behind.
#[derive(Debug, Default)]
pub struct Ledger {
    pub messages: usize,
    /// Chat messages by platform: sent, and answered with their echo.
    pub by_platform: Vec<(Platform, usize, usize)>,
    /// Messages answered as they should be: chat messages and API calls with their echo,
    /// capped users' messages with the budget's refusal.
    pub answered: usize,
    pub lost: usize,
    /// Messages answered more than once.
    pub doubled: usize,
    /// Texts that are neither an answer nor an expected refusal ("sorry", "can't check").
    pub failure_replies: usize,
    /// The failure replies' texts, most frequent first.
    pub failure_texts: Vec<(String, usize)>,
    pub runs: i64,
    pub duplicate_runs: i64,
    pub open_runs: i64,
    pub failed_runs: i64,
    /// Credit movements: one charge per chat run, one refund per failed chat run.
    pub charges: i64,
    pub refunds: i64,
    pub chat_runs: i64,
    pub failed_chat_runs: i64,
    /// Messages from users whose budget was spent, their refusals, and model answers they
    /// got anyway (a budget not enforced).
    pub capped: usize,
    pub capped_refused: usize,
    pub capped_answered: usize,
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
    /// A few of the wrong answers, `sent → got`.
    pub api_wrong_samples: Vec<String>,
    /// Whether a killswitch turned on before a Redis restart still held after it (`None`:
    /// not probed).
    pub killswitch_held: Option<bool>,
}

async fn count(db: &Db, sql: &str) -> anyhow::Result<i64> {
    let c = db.get().await?;
    Ok(c.query_one(sql, &[])
        .await?
        .get::<_, Option<i64>>(0)
        .unwrap_or(0))
}

/// What the chats received, sorted by what each send was.
#[derive(Default)]
struct Chats {
    answers_per_token: HashMap<String, usize>,
    capped_refused: usize,
    capped_answered: usize,
    failure_texts: HashMap<String, usize>,
}

impl Chats {
    fn read(seen: &Seen) -> Self {
        let mut c = Self::default();
        for sent in seen.sent() {
            let token = sent
                .text
                .split_whitespace()
                .find(|w| w.starts_with("ledger-"));
            let echo = sent.text.starts_with("echo: ");
            match (is_capped(sent.chat), token) {
                (true, Some(_)) if echo => c.capped_answered += 1,
                (true, _) if sent.text.starts_with(BUDGET_REFUSAL) => c.capped_refused += 1,
                (false, Some(t)) if echo => {
                    *c.answers_per_token.entry(t.to_string()).or_default() += 1;
                }
                _ => {
                    let text = sent.text.chars().take(120).collect();
                    *c.failure_texts.entry(text).or_default() += 1;
                }
            }
        }
        c
    }
}

impl Ledger {
    pub async fn read(
        messages: usize,
        mix: &Mix,
        seen: &Seen,
        calls: &Calls,
        db: &Db,
        bus: &Bus,
    ) -> anyhow::Result<Self> {
        let chats = Chats::read(seen);
        let answered = |i: &usize| chats.answers_per_token.contains_key(&token(*i));
        let platform_of = |i: usize| match mix.path(i) {
            Path::Chat(p, _) => Some(p),
            _ => None,
        };
        let chat_messages: Vec<usize> = (0..messages)
            .filter(|i| platform_of(*i).is_some())
            .collect();
        let chat_answered = chat_messages.iter().filter(|i| answered(i)).count();
        let by_platform = mix
            .platforms
            .iter()
            .map(|p| {
                let of_p = || {
                    chat_messages
                        .iter()
                        .filter(|i| platform_of(**i) == Some(*p))
                };
                (*p, of_p().count(), of_p().filter(|i| answered(i)).count())
            })
            .collect();
        let capped = mix.count(messages, |p| matches!(p, Path::Capped(_)));
        let api = &seen.api;
        let load = |n: &AtomicUsize| n.load(Ordering::SeqCst);
        let (api_sent, api_refused) = (load(&api.sent), load(&api.refused));
        let (api_answered, api_cut, api_wrong) =
            (load(&api.answered), load(&api.cut), load(&api.wrong));
        let mut parked = 0u64;
        for stage in Stage::ALL {
            if let Ok((n, _)) = bus.queue_stats(&bus.names().parking(stage)).await {
                parked += u64::from(n);
            }
        }
        let mut failure_texts: Vec<_> = chats.failure_texts.into_iter().collect();
        failure_texts.sort_by_key(|t| std::cmp::Reverse(t.1));
        let capped_refused = chats.capped_refused.min(capped);
        Ok(Self {
            messages,
            by_platform,
            failure_replies: failure_texts.iter().map(|(_, n)| n).sum(),
            failure_texts,
            answered: chat_answered + capped_refused + api_answered,
            // Chat messages never answered, capped users' messages never refused, and API
            // calls taken whose stream ended without an answer or never ended.
            lost: chat_messages.len() - chat_answered + capped - capped_refused
                + (api_sent - api_refused - api_answered - api_cut - api_wrong),
            doubled: chats.answers_per_token.values().filter(|n| **n > 1).count()
                + chats.capped_refused.saturating_sub(capped),
            capped,
            capped_refused,
            capped_answered: chats.capped_answered,
            runs: count(db, "SELECT count(*) FROM agent_runs").await?,
            duplicate_runs: count(
                db,
                "SELECT coalesce(sum(n - 1), 0)::bigint FROM
                   (SELECT count(*) AS n FROM agent_runs GROUP BY input_text HAVING count(*) > 1) d",
            )
            .await?,
            open_runs: count(
                db,
                "SELECT count(*) FROM agent_runs WHERE status NOT IN ('completed', 'failed', 'cancelled', 'expired')",
            )
            .await?,
            failed_runs: count(db, "SELECT count(*) FROM agent_runs WHERE status = 'failed'")
                .await?,
            charges: count(db, "SELECT count(*) FROM credit_ledger WHERE reason = 'charge'")
                .await?,
            refunds: count(db, "SELECT count(*) FROM credit_ledger WHERE reason = 'refund'")
                .await?,
            chat_runs: count(db, "SELECT count(*) FROM agent_runs WHERE platform <> 'api'")
                .await?,
            failed_chat_runs: count(
                db,
                "SELECT count(*) FROM agent_runs WHERE platform <> 'api' AND status = 'failed'",
            )
            .await?,
            parked,
            model_calls: calls.total(),
            repeated_model_calls: calls.repeated(),
            api_sent,
            api_refused,
            api_cut,
            api_wrong,
            api_wrong_samples: api
                .wrong_samples
                .lock()
                .map(|s| s.clone())
                .unwrap_or_default(),
            killswitch_held: None,
        })
    }

    /// Why the run is void, if it is: anything lost, a second run, a failure reply, a parked
    /// message, a run left open, a budget or killswitch not enforced, credits that do not
    /// balance, more doubled sends than `max_doubled` allows, and, when every fault was
    /// graceful (`graceful`: stops, no kills or outages), any doubled send, model call made
    /// twice or API stream cut.
    pub fn problems(&self, max_doubled: f64, graceful: bool) -> Vec<String> {
        let mut p = Vec::new();
        let mut check = |bad: bool, what: String| {
            if bad {
                p.push(what);
            }
        };
        check(
            graceful && self.repeated_model_calls > 0,
            format!(
                "{} model calls made twice through graceful stops",
                self.repeated_model_calls
            ),
        );
        check(
            self.lost > 0,
            format!("{} messages never answered", self.lost),
        );
        check(
            self.duplicate_runs > 0,
            format!("{} duplicate runs", self.duplicate_runs),
        );
        check(
            self.failure_replies > 0,
            format!(
                "{} failure replies instead of answers ({:?})",
                self.failure_replies, self.failure_texts
            ),
        );
        check(
            self.capped_answered > 0,
            format!(
                "budget not enforced: {} model answers to users whose budget was spent",
                self.capped_answered
            ),
        );
        check(
            self.killswitch_held == Some(false),
            "the killswitch did not hold across a Redis restart".into(),
        );
        check(self.parked > 0, format!("{} messages parked", self.parked));
        check(
            self.open_runs > 0,
            format!("{} runs left open", self.open_runs),
        );
        // The only runs that fail are the capped users' (refused, refunded).
        check(
            self.failed_chat_runs != self.capped as i64
                || self.failed_runs != self.failed_chat_runs,
            format!(
                "{} runs failed ({} chat), {} refused for budget",
                self.failed_runs, self.failed_chat_runs, self.capped
            ),
        );
        check(
            self.charges != self.chat_runs || self.refunds != self.failed_chat_runs,
            format!(
                "{} charges and {} refunds for {} chat runs of which {} failed",
                self.charges, self.refunds, self.chat_runs, self.failed_chat_runs
            ),
        );
        check(
            self.api_wrong > 0,
            format!(
                "{} API answers were not the echo of their message (such as {})",
                self.api_wrong,
                self.api_wrong_samples.join("; ")
            ),
        );
        check(
            graceful && self.api_cut > 0,
            format!("{} API streams cut through graceful stops", self.api_cut),
        );
        let max_doubled = if graceful { 0.0 } else { max_doubled };
        let share = 100.0 * self.doubled as f64 / self.messages.max(1) as f64;
        check(
            share > max_doubled,
            format!(
                "{} doubled sends ({share:.2} %, more than {max_doubled} %)",
                self.doubled
            ),
        );
        p
    }
}

impl fmt::Display for Ledger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "messages {} | answered {} | lost {} | runs {} ({} failed) | duplicate runs {} | \
             doubled sends {} | model calls {} ({} made twice) | failure replies {} | parked {} | \
             open runs {} | budget-capped {} (refused {}, answered by the model {}) | \
             charges {}, refunds {} | API calls {} (refused {}, streams cut {}, wrong {})",
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
            self.capped,
            self.capped_refused,
            self.capped_answered,
            self.charges,
            self.refunds,
            self.api_sent,
            self.api_refused,
            self.api_cut,
            self.api_wrong
        )?;
        if !self.by_platform.is_empty() {
            let each: Vec<String> = (self.by_platform.iter())
                .map(|(p, sent, answered)| format!("{} {answered}/{sent}", p.as_str()))
                .collect();
            write!(f, " | chat answered by channel: {}", each.join(", "))?;
        }
        match self.killswitch_held {
            Some(true) => write!(f, " | killswitch held across a Redis restart"),
            Some(false) => write!(f, " | killswitch LOST across a Redis restart"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn balanced() -> Ledger {
        Ledger {
            messages: 100,
            answered: 100,
            runs: 100,
            chat_runs: 90,
            charges: 90,
            capped: 5,
            capped_refused: 5,
            failed_runs: 5,
            failed_chat_runs: 5,
            refunds: 5,
            ..Ledger::default()
        }
    }

    #[test]
    fn a_balanced_ledger_has_no_problems() {
        assert_eq!(balanced().problems(0.1, false), Vec::<String>::new());
    }

    #[test]
    fn a_budget_not_enforced_or_a_killswitch_lost_voids_the_run() {
        let mut l = balanced();
        l.capped_answered = 1;
        assert!(l.problems(0.1, false)[0].contains("budget not enforced"));
        let mut l = balanced();
        l.killswitch_held = Some(false);
        assert!(l.problems(0.1, false)[0].contains("killswitch"));
    }

    #[test]
    fn a_failure_that_is_not_a_budget_refusal_or_a_missing_refund_voids_the_run() {
        let mut l = balanced();
        l.failed_runs = 6;
        l.failed_chat_runs = 6;
        l.refunds = 6;
        assert_eq!(l.problems(0.1, false).len(), 1);
        let mut l = balanced();
        l.refunds = 4;
        assert!(l.problems(0.1, false)[0].contains("refunds"));
    }

    #[test]
    fn graceful_runs_allow_no_doubled_send() {
        let mut l = balanced();
        l.doubled = 1;
        assert!(l.problems(1.0, false).is_empty());
        assert_eq!(l.problems(1.0, true).len(), 1);
    }
}
