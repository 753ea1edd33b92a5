//! A run's history as its page shows it (docs/console.md, "A run's page"), oldest first: the
//! operators' actions and the event log's rows for the run, and each of its model calls with
//! the model that answered, its own tokens, cost and time, or why it failed.

use chrono::{DateTime, Utc};
use hermes_types::model::ModelCall;

use super::html::esc;
use super::runs::dollars;

/// One line of a run's history.
pub struct Entry {
    pub at: DateTime<Utc>,
    pub what: String,
    pub details: String,
}

impl Entry {
    /// A model call of the run.
    fn of_call(c: &ModelCall) -> Entry {
        let mut details = format!("{}: ", c.model);
        match c.error {
            Some(code) => details.push_str(&format!("failed, {}", code.as_str())),
            None => {
                details.push_str(&format!(
                    "{} tokens in, {} out, {} USD",
                    c.usage.input_tokens,
                    c.usage.output_tokens,
                    dollars(i64::try_from(c.usage.cost_micro_usd).unwrap_or(i64::MAX)),
                ));
                if let Some(reason) = &c.finish_reason {
                    details.push_str(&format!(", {}", reason.as_str()));
                }
                if c.cache_hit {
                    details.push_str(", from the cache");
                }
            }
        }
        details.push_str(&format!(", {} ms", c.ms));
        Entry {
            at: c.at,
            what: format!("model call, round {}", c.round),
            details,
        }
    }
}

/// `logged` (rows of the run's event and activity logs) and its model `calls`, in time order;
/// a call and a row at the same instant keep the row first.
pub fn merged(mut logged: Vec<Entry>, calls: &[ModelCall]) -> Vec<Entry> {
    logged.extend(calls.iter().map(Entry::of_call));
    logged.sort_by_key(|e| e.at);
    logged
}

/// The history as a table, every text escaped.
pub fn html(entries: &[Entry]) -> String {
    let mut out = String::from(
        "<h2>History</h2><table><thead><tr><th>When</th><th>What</th><th>Details</th></tr></thead><tbody>",
    );
    for e in entries {
        out.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
            e.at.format("%H:%M:%S%.3f"),
            esc(&e.what),
            esc(&e.details),
        ));
    }
    out.push_str("</tbody></table>");
    out
}

#[cfg(test)]
mod tests {
    use hermes_types::model::{FailureCode, FinishReason, Usage};

    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_790_000_000_000 + ms).unwrap()
    }

    #[test]
    fn each_call_takes_its_place_in_the_history_with_its_own_usage_or_failure() {
        let answered = ModelCall {
            round: 1,
            at: at(20),
            model: "fast<b>".into(),
            usage: Usage {
                input_tokens: 31,
                output_tokens: 9,
                cost_micro_usd: 1_250,
            },
            cache_hit: true,
            finish_reason: Some(FinishReason::Stop),
            error: None,
            ms: 412,
        };
        let failed = ModelCall {
            round: 0,
            at: at(0),
            usage: Usage::default(),
            cache_hit: false,
            finish_reason: None,
            error: Some(FailureCode::ProvidersUnavailable),
            ms: 3_000,
            ..answered.clone()
        };
        let logged = vec![Entry {
            at: at(10),
            what: "approval_requested".into(),
            details: "{}".into(),
        }];
        let entries = merged(logged, &[answered, failed]);
        let whats: Vec<&str> = entries.iter().map(|e| e.what.as_str()).collect();
        assert_eq!(
            whats,
            [
                "model call, round 0",
                "approval_requested",
                "model call, round 1"
            ]
        );
        assert_eq!(
            entries[2].details,
            "fast<b>: 31 tokens in, 9 out, 0.001250 USD, stop, from the cache, 412 ms"
        );
        assert_eq!(
            entries[0].details,
            "fast<b>: failed, providers_unavailable, 3000 ms"
        );
        let page = html(&entries);
        assert!(
            page.contains("fast&lt;b&gt;") && !page.contains("fast<b>"),
            "{page}"
        );
    }
}
