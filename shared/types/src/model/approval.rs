//! An operator's answer to a tool call that waited for approval (docs/operator-mcp.md,
//! approvals). It travels with the resumed tool round, so the tools stage runs an allowed
//! call and gives a denied one a structured denial instead of running it.

use serde::{Deserialize, Serialize};

/// How a waiting call was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// An operator allowed it: it runs.
    Allowed,
    /// An operator denied it: the model gets the denial.
    Denied,
    /// Nobody answered within the approval timeout: denied.
    TimedOut,
}

impl Verdict {
    pub const ALL: [Verdict; 3] = [Verdict::Allowed, Verdict::Denied, Verdict::TimedOut];

    /// The name stored in `tool_approvals.status` and used as a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Denied => "denied",
            Verdict::TimedOut => "timed_out",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Does the call run?
    pub fn runs(self) -> bool {
        self == Verdict::Allowed
    }
}

/// The answer to one call of a resumed round.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    /// The model's id of the call.
    pub call_id: String,
    pub verdict: Verdict,
    /// Who answered (`stdio`, `operator` or `key:<key id>`; `None` for a timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Why, as the operator put it (shown to the model with a denial).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
