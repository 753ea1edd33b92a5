//! Each model call of a run, as an operator reads it on the run's page (docs/console.md,
//! "A run's page"): the model that answered, its tokens and cost, how long it took, or why it
//! failed. The run's row keeps only the totals; these say where they came from.
//!
//! The calls travel with the run's own messages (llm → tools → llm → delivery) and are
//! written in the statement that closes the run, so recording them costs no statement and
//! no round trip of its own (docs/performance.md, "Each model call of a run").

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{FailureCode, FinishReason, MAX_TOOL_ROUNDS, Usage};

/// Most calls a run records: one per round, and a run takes at most [`MAX_TOOL_ROUNDS`]
/// rounds after its first call. A redelivered call replaces nothing and adds nothing, since
/// the list travels in the message it answers.
pub const MAX_RECORDED_CALLS: usize = MAX_TOOL_ROUNDS as usize + 1;

/// One model call of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCall {
    /// 0 for the first call; n for the call after the n-th tool round.
    pub round: u8,
    /// When the call began, which places it in the run's history.
    pub at: DateTime<Utc>,
    /// The hop of the failover chain that answered (a logical model name, or
    /// `agent:<backend>`); of a failed call, the first model it would have tried.
    pub model: String,
    /// This call's own tokens and cost (the run's totals are their sum).
    #[serde(default)]
    pub usage: Usage,
    /// Answered from the response cache: no provider was asked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_hit: bool,
    /// Why the answer ended, as the provider said; absent for a failed call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<FinishReason>,
    /// Why the call got no answer; absent for an answered one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<FailureCode>,
    /// From the first hop to the answer, waiting for a slot and failing over included.
    pub ms: u64,
}

/// Add `call` to a run's `calls`, unless the list is at its bound.
pub fn record_call(calls: &mut Vec<ModelCall>, call: ModelCall) {
    if calls.len() < MAX_RECORDED_CALLS {
        calls.push(call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(round: u8) -> ModelCall {
        ModelCall {
            round,
            at: DateTime::from_timestamp_millis(1_790_000_000_000).unwrap(),
            model: "fast".into(),
            usage: Usage::default(),
            cache_hit: false,
            finish_reason: Some(FinishReason::Stop),
            error: None,
            ms: 12,
        }
    }

    #[test]
    fn the_list_stops_at_its_bound() {
        let mut calls = Vec::new();
        for round in 0..=MAX_TOOL_ROUNDS {
            record_call(&mut calls, call(round));
        }
        assert_eq!(calls.len(), MAX_RECORDED_CALLS);
        record_call(&mut calls, call(0));
        assert_eq!(calls.len(), MAX_RECORDED_CALLS);
        assert_eq!(calls.last().unwrap().round, MAX_TOOL_ROUNDS);
    }

    #[test]
    fn a_call_reads_back_as_written_and_leaves_out_what_it_lacks() {
        let failed = ModelCall {
            finish_reason: None,
            error: Some(FailureCode::ProvidersUnavailable),
            ..call(1)
        };
        let json = serde_json::to_value(&failed).unwrap();
        assert_eq!(json["error"], "providers_unavailable");
        assert!(json.get("finish_reason").is_none() && json.get("cache_hit").is_none());
        assert_eq!(serde_json::from_value::<ModelCall>(json).unwrap(), failed);
    }
}
