//! Tool calls that wait for an operator's approval (docs/operator-mcp.md, approvals): how
//! long a call waits before it is denied as timed out, and how often the tools service
//! looks for such calls.

use std::time::Duration;

use super::Unset::Value;
use super::{kinds, settings};

settings! {
    /// Approvals.
    SETTINGS = [
        HERMES_APPROVAL_TIMEOUT: Duration {
            kind: kinds::DURATION,
            unset: Value("10m"),
            secret: false,
            help: "how long a tool call that `requires_approval` waits for an operator before it is denied as `timed_out` (`90s`, `10m`, `2h`)",
        },
        HERMES_APPROVAL_SWEEP_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("10"),
            secret: false,
            help: "how often the tools service times out unanswered approvals and updates the approval gauges",
        },
    ]
}
