//! The kinds of ops alert: what the alerts crate posts and what `hermes_alerts_total{kind}`
//! counts (every kind is pre-registered so a dashboard shows zeros, not gaps).

use std::fmt;

/// What is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertKind {
    /// A platform's circuit breaker opened: its sends are skipped for a while.
    BreakerOpen,
    /// A parking queue holds more messages than the threshold.
    ParkingQueueGrowth,
    /// A full parking queue refused a message (it stays in its work queue).
    ParkingQueueFull,
    /// `hermes killswitch on`: every model call is blocked.
    KillswitchOn,
    /// A soul cache entry could not be dropped: a stale soul may serve up to an hour.
    SoulInvalidationFailed,
    /// A dependency (PostgreSQL) has been unreachable for a while: stages hold their messages.
    DependencyDown,
    /// A tool call has waited longer than `HERMES_ALERT_APPROVAL_WAIT` for an operator.
    ApprovalWaiting,
}

impl AlertKind {
    /// Every kind, so each series of `hermes_alerts_total` exists from the start.
    pub const ALL: [AlertKind; 7] = [
        AlertKind::BreakerOpen,
        AlertKind::ParkingQueueGrowth,
        AlertKind::ParkingQueueFull,
        AlertKind::KillswitchOn,
        AlertKind::SoulInvalidationFailed,
        AlertKind::DependencyDown,
        AlertKind::ApprovalWaiting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::BreakerOpen => "breaker_open",
            AlertKind::ParkingQueueGrowth => "parking_queue_growth",
            AlertKind::ParkingQueueFull => "parking_queue_full",
            AlertKind::KillswitchOn => "killswitch_on",
            AlertKind::SoulInvalidationFailed => "soul_invalidation_failed",
            AlertKind::DependencyDown => "dependency_down",
            AlertKind::ApprovalWaiting => "approval_waiting",
        }
    }
}

impl fmt::Display for AlertKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
