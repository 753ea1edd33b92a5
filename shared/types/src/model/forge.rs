//! A Forge run's preflight (docs/agents.md, "The loop, enforced"): before the model of a
//! run a Forge woke acts, the tools stage (which holds the Forge's MCP session) lists the
//! agent's unacked runs, finds the woken one, acknowledges it and reads its context
//! bundle, then hands the model call on to the llm stage with the bundle in its context.
//! This module holds the message and the rule that finds the woken run in the inbox.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::LlmRequest;
use crate::envelope::{MessageKind, Payload};

/// The name of the MCP server that is the Forge (`[mcp_servers.forge]`): its tools are
/// `mcp_forge_<tool>` and its toolset `mcp-forge`, always offered to a Forge run.
pub const FORGE_MCP_SERVER: &str = "forge";

/// The preflight of a Forge run: the model call to make once the loop's first three steps
/// are done, and which run of the Forge's inbox the wake is about.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ForgePreflight {
    pub request: LlmRequest,
    pub target: ForgeTarget,
}

impl Payload for ForgePreflight {
    const KIND: MessageKind = MessageKind::ForgePreflight;
}

/// A Forge chat run's whole answer, owed to its thread (docs/agents.md, "Answers stream to
/// the Forge"). Delivery emits it in the transaction that closes the run, so the answer is
/// posted even when the tools replica that streamed the draft is gone; the thread and the
/// draft are read from the run's `forge_answers` row, written by the preflight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeAnswer {
    /// The whole answer: the model's text, or the failure the person is told.
    pub body: String,
}

impl Payload for ForgeAnswer {
    const KIND: MessageKind = MessageKind::ForgeAnswer;
}

/// The run a wake names: the contract's `issue.id` (the Forge's `agent.context.bundle`
/// takes it) and, when the Forge also sends one, its run's own id (`run.id`, `runId`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The chat thread of a `CHAT_MESSAGE_POSTED` wake (`threadId`): the run's answer is
    /// posted there (docs/agents.md, "Answers stream to the Forge").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

/// One run of the Forge's inbox: the ids the preflight acknowledges and reads it by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxRun {
    pub run_id: String,
    pub issue_id: Option<String>,
}

/// A string or a number at `v`, as a string (Forges write ids either way).
fn id_at(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

impl ForgeTarget {
    /// The target of the wake `envelope` as the Forge sent it: `issue.id` (else a top-level
    /// `issueId`), `run.id` (else `runId`) and `threadId` (else `thread.id`).
    pub fn of_wake(envelope: &Value) -> Self {
        Self {
            issue_id: id_at(envelope.pointer("/issue/id"))
                .or_else(|| id_at(envelope.get("issueId"))),
            run_id: id_at(envelope.pointer("/run/id")).or_else(|| id_at(envelope.get("runId"))),
            thread_id: id_at(envelope.get("threadId"))
                .or_else(|| id_at(envelope.pointer("/thread/id"))),
        }
    }

    /// Whether the wake names a run at all.
    pub fn is_empty(&self) -> bool {
        self.issue_id.is_none() && self.run_id.is_none()
    }

    /// The woken run among the runs of an `agent.inbox.list` answer: the entry whose run id
    /// is the wake's run id, else the first whose issue id is the wake's issue id. The
    /// answer is `{"runs": […]}` (also `items`, `data`, `inbox`) or a bare array; an entry
    /// names its run `runId` (else `id`) and its issue `issueId` (else `issue.id`).
    pub fn find(&self, inbox: &Value) -> Option<InboxRun> {
        let runs: Vec<InboxRun> = inbox_entries(inbox)
            .iter()
            .filter_map(|e| {
                Some(InboxRun {
                    run_id: id_at(e.get("runId")).or_else(|| id_at(e.get("id")))?,
                    issue_id: id_at(e.get("issueId")).or_else(|| id_at(e.pointer("/issue/id"))),
                })
            })
            .collect();
        let by_run = self
            .run_id
            .as_ref()
            .and_then(|id| runs.iter().find(|r| &r.run_id == id));
        let by_issue = || {
            self.issue_id
                .as_ref()
                .and_then(|id| runs.iter().find(|r| r.issue_id.as_ref() == Some(id)))
        };
        by_run.or_else(by_issue).cloned()
    }
}

/// The entries of an inbox answer.
fn inbox_entries(inbox: &Value) -> &[Value] {
    if let Some(a) = inbox.as_array() {
        return a;
    }
    ["runs", "items", "data", "inbox"]
        .iter()
        .find_map(|k| inbox.get(*k).and_then(Value::as_array))
        .map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_wake_names_its_issue_and_run_and_the_inbox_finds_it() {
        let wake =
            json!({"kind": "AGENT_ASSIGNED", "issue": {"id": "iss_1"}, "run": {"id": "run_9"}});
        let t = ForgeTarget::of_wake(&wake);
        assert_eq!(t.issue_id.as_deref(), Some("iss_1"));
        assert_eq!(t.run_id.as_deref(), Some("run_9"));
        assert_eq!(t.thread_id, None);
        let chat =
            json!({"kind": "CHAT_MESSAGE_POSTED", "issue": {"id": "iss_1"}, "threadId": "thr_1"});
        assert_eq!(
            ForgeTarget::of_wake(&chat).thread_id.as_deref(),
            Some("thr_1")
        );
        let inbox = json!({"runs": [
            {"runId": "run_1", "issueId": "iss_0"},
            {"runId": "run_2", "issueId": "iss_1"},
            {"runId": "run_9", "issueId": "iss_1"},
        ]});
        // The run id wins over the issue id.
        assert_eq!(t.find(&inbox).unwrap().run_id, "run_9");
        let by_issue = ForgeTarget {
            run_id: None,
            ..t.clone()
        };
        assert_eq!(by_issue.find(&inbox).unwrap().run_id, "run_2");
        // A bare array, `id` and a nested issue.
        let bare = json!([{"id": 7, "issue": {"id": "iss_1"}}]);
        assert_eq!(by_issue.find(&bare).unwrap().run_id, "7");
        assert_eq!(t.find(&json!({"runs": []})), None);
        assert_eq!(t.find(&json!("not an inbox")), None);
        assert!(ForgeTarget::of_wake(&json!({})).is_empty());
    }
}
