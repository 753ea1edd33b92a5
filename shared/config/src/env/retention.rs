//! Retention: how many days each family of tables keeps its rows before the router's
//! sweeper removes them (0 keeps them for ever), and how often it sweeps
//! (`docs/security.md`, "What is stored where, and for how long").

use std::time::Duration;

use super::Unset::Value;
use super::{kinds, settings};

settings! {
    /// Retention.
    SETTINGS = [
        HERMES_RETENTION_RUNS_DAYS: u32 {
            kind: kinds::U32,
            unset: Value("90"),
            secret: false,
            help: "days a closed run (`agent_runs`) is kept, with its `activity_events` and finished `webhook_deliveries`; 0 keeps them",
        },
        HERMES_RETENTION_CONVERSATIONS_DAYS: u32 {
            kind: kinds::U32,
            unset: Value("90"),
            secret: false,
            help: "days a message (`interactions`, and the operators' `events` log) is kept, and an idle session (`sessions`); 0 keeps them",
        },
        HERMES_RETENTION_STATUSES_DAYS: u32 {
            kind: kinds::U32,
            unset: Value("30"),
            secret: false,
            help: "days a platform's delivery status (`message_statuses`) is kept; 0 keeps them",
        },
        HERMES_RETENTION_FACTS_DAYS: u32 {
            kind: kinds::U32,
            unset: Value("365"),
            secret: false,
            help: "days a fact extracted from conversations (`user_memory`) is kept after its last update; operator-set memory is never swept; 0 keeps them",
        },
        HERMES_RETENTION_LEDGER_DAYS: u32 {
            kind: kinds::U32,
            unset: Value("365"),
            secret: false,
            help: "days `credit_ledger` rows stay itemized; older ones are folded into one `summary` row per user (the balance still adds up; an open run's charge is never folded); 0 keeps them",
        },
        HERMES_RETENTION_RESPONSES_DAYS: u32 {
            kind: kinds::U32,
            unset: Value("30"),
            secret: false,
            help: "days a response of the Responses API (`responses`: its input, and through its run its output) is kept and can be read or chained to; its run stays as long; 0 keeps them",
        },
        HERMES_RETENTION_FORGE_DELIVERIES_DAYS: u32 {
            kind: kinds::U32,
            unset: Value("7"),
            secret: false,
            help: "days a Forge wake's delivery id (`forge_deliveries`) is remembered, so a replay of it queues nothing; 0 keeps them",
        },
        HERMES_RETENTION_SWEEP_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("3600"),
            secret: false,
            help: "how often a router sweeps expired rows (in small batches; one replica at a time)",
        },
    ]
}
