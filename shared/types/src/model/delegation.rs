//! Fan-out (docs/a2a.md, "Delegating to other workspaces"): the built-in tool an orchestrator
//! workspace's runs are offered, `delegate_task_async`, starts a run in another workspace
//! for each call, holds its tool round until every one of them has ended, and gives their
//! answers back to the model as the calls' results.
//!
//! What travels: a delegated run's [`Inbound`](super::Inbound) names its parent and its
//! depth ([`Delegated`]), so the router offers the tool again only below [`MAX_DEPTH`] and
//! gives a child of a stopped parent the stop at once; a resumed round carries its calls'
//! results already made ([`super::ToolResult`]), so nothing of it runs twice.

use serde::{Deserialize, Serialize};

use crate::ids::RunId;

/// The tool's name, as the model calls it (the source document's name).
pub const TOOL_NAME: &str = "delegate_task_async";

/// How deep delegation nests: a run started by delegation at this depth is not offered the
/// tool, so a cycle of orchestrators delegating to each other ends.
pub const MAX_DEPTH: u8 = 3;

/// Most delegations one tool round starts; calls past it are refused with a result.
pub const MAX_PER_ROUND: usize = 8;

/// Longest task text a delegation carries, in bytes.
pub const MAX_TASK_BYTES: usize = 16 * 1024;

/// Longest answer of a delegated run handed back to the model, in bytes (cut at a
/// character boundary, and said so).
pub const MAX_ANSWER_BYTES: usize = 32 * 1024;

/// A run started by delegation: whose tool round waits for it, and how deep it is (1: a
/// run delegated by a run nobody delegated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delegated {
    pub parent: RunId,
    pub depth: u8,
}

impl Delegated {
    /// Whether a run this deep may delegate again.
    pub fn may_delegate(depth: u8) -> bool {
        depth < MAX_DEPTH
    }
}

/// How a delegated run ended, as its delegation records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Completed,
    Failed,
    Cancelled,
    Expired,
}

impl Ended {
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Completed => "completed",
            Ended::Failed => "failed",
            Ended::Cancelled => "cancelled",
            Ended::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Completed,
            Self::Failed,
            Self::Cancelled,
            Self::Expired,
        ]
        .into_iter()
        .find(|e| e.as_str() == s)
    }
}

/// What the model reads as the result of a `delegate_task_async` call whose run ended: the
/// task's id (the run's, an A2A task of `workspace`), how it ended, and its answer (cut at
/// [`MAX_ANSWER_BYTES`]) or its failure.
pub fn result_text(
    task: RunId,
    workspace: &str,
    ended: Ended,
    text: Option<&str>,
    code: Option<&str>,
) -> String {
    let mut body = serde_json::json!({
        "task_id": task.to_string(),
        "workspace": workspace,
        "status": ended.as_str(),
    });
    let text = text.unwrap_or_default();
    if ended == Ended::Completed {
        let cut = cut_at(text, MAX_ANSWER_BYTES);
        body["answer"] = cut.into();
        if cut.len() < text.len() {
            body["truncated"] = true.into();
        }
    } else {
        body["error"] = serde_json::json!({
            "code": code.unwrap_or(ended.as_str()),
            "message": cut_at(text, MAX_ANSWER_BYTES),
        });
    }
    body.to_string()
}

/// What the model reads for a call that started nothing: why, so it can correct the call.
pub fn refusal_text(reason: &str, message: &str) -> String {
    serde_json::json!({
        "refused": true,
        "tool": TOOL_NAME,
        "reason": reason,
        "message": message,
    })
    .to_string()
}

/// `text` cut to at most `max` bytes at a character boundary.
fn cut_at(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_carries_the_answer_cut_or_the_failure() {
        let task = RunId::new();
        let done: serde_json::Value =
            serde_json::from_str(&result_text(task, "w", Ended::Completed, Some("hi"), None))
                .unwrap();
        assert_eq!(done["status"], "completed");
        assert_eq!(done["answer"], "hi");
        assert_eq!(done["task_id"], task.to_string());
        assert!(done.get("truncated").is_none());

        let long = "é".repeat(MAX_ANSWER_BYTES);
        let cut: serde_json::Value =
            serde_json::from_str(&result_text(task, "w", Ended::Completed, Some(&long), None))
                .unwrap();
        assert_eq!(cut["truncated"], true);
        assert!(cut["answer"].as_str().unwrap().len() <= MAX_ANSWER_BYTES);

        let failed: serde_json::Value = serde_json::from_str(&result_text(
            task,
            "w",
            Ended::Cancelled,
            Some("stopped"),
            Some("cancelled"),
        ))
        .unwrap();
        assert_eq!(failed["status"], "cancelled");
        assert_eq!(failed["error"]["message"], "stopped");
        assert!(failed.get("answer").is_none());
        assert!(Delegated::may_delegate(MAX_DEPTH - 1));
        assert!(!Delegated::may_delegate(MAX_DEPTH));
        assert_eq!(Ended::parse("expired"), Some(Ended::Expired));
    }
}
