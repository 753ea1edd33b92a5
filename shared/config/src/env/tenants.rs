//! What one tenant may hold (docs/security.md, "Keys and tenants"): the scheduled jobs of one
//! API key and how often they may run, and the facts external agents may remember about one
//! user.

use std::time::Duration;

use super::Unset::Value;
use super::{kinds, settings};

settings! {
    /// Tenants' limits.
    SETTINGS = [
        HERMES_JOBS_PER_KEY: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("100"),
            secret: false,
            help: "most scheduled jobs one API key may hold (`POST /api/jobs` past it: 429 `job_limit_reached`); the operator key's jobs are not counted",
        },
        HERMES_JOB_MIN_INTERVAL_SECS: Duration {
            kind: kinds::SECS_ABOVE_ZERO,
            unset: Value("60"),
            secret: false,
            help: "shortest time between two runs of one job: a schedule that runs more often is refused (400 `invalid_schedule`), a run now sooner after the job's last run gets 429 `job_too_frequent`, and the scheduler never runs a job sooner",
        },
        HERMES_AGENT_FACTS_PER_USER: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("100"),
            secret: false,
            help: "most facts external agents may remember about one user with `memory.remember` (past it: `LIMIT_EXCEEDED`); their facts expire after `HERMES_RETENTION_FACTS_DAYS`",
        },
    ]
}
