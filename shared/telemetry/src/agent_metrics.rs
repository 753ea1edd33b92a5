//! The metrics of the agent contract (docs/agents.md, "The agent's side" and "Hermes as a
//! Forge agent"): external runs by agent and outcome, how long agents take to acknowledge and
//! to answer, re-wakes and expiries, presence, the MCP surface's calls and Forge wakes; and
//! the refusals of what tenants (keys and their agents) may hold (docs/security.md).

use prometheus::{HistogramVec, IntCounterVec, Registry};

use crate::metrics::{counter_vec as counter, histogram_vec};

/// Buckets for an agent's time to acknowledge or answer: a second to an hour.
const AGENT_LATENCY: &[f64] = &[
    0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// The agent contract's metric handles (a part of the process's registry).
#[derive(Clone)]
pub struct AgentMetrics {
    /// External runs that ended, by agent (profile key) and outcome: `answered`, `failed`
    /// (the agent called `runs.fail`), `expired` (past the reply deadline).
    pub runs: IntCounterVec,
    /// From a run's dispatch to the agent's `inbox.ack`, by agent.
    pub time_to_ack: HistogramVec,
    /// From a run's dispatch to its answer (`chat.appendMessage` or `chat.finalizeDraft`).
    pub time_to_answer: HistogramVec,
    /// Unacknowledged runs woken again on the retry schedule, by agent.
    pub rewakes: IntCounterVec,
    /// Runs assigned to a BUSY or OFFLINE external agent, by agent and outcome: `held` (the
    /// run waits for the agent) and `released` (the agent is ONLINE again: woken or listed).
    pub held_runs: IntCounterVec,
    /// Agents marked OFFLINE because they were silent past the presence window, by agent.
    pub presence_expired: IntCounterVec,
    /// Calls to the MCP surface, by tool and outcome (`ok` or the error's code).
    pub mcp_calls: IntCounterVec,
    /// JWT bearers on the agent MCP surface, by outcome (`accepted` or the refusal).
    pub mcp_jwt: IntCounterVec,
    /// Forge wakes received, by outcome (`queued`, `duplicate`, or the refusal's code).
    pub forge_wakes: IntCounterVec,
    /// Draft updates the delivery stage handled, by outcome: `shown` (the draft's message
    /// sent), `edited`, `skipped` (too soon after the last edit, too long, or empty), `dropped`
    /// (older than what is shown, the run answered, a platform that shows no drafts, or the
    /// platform refused it).
    pub draft_updates: IntCounterVec,
    /// Requests refused because a tenant's limit was reached, by [`TenantLimit`].
    pub limit_refusals: IntCounterVec,
}

/// A limit on what one tenant may hold or do (the `limit` label of
/// `hermes_tenant_limit_refusals_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TenantLimit {
    /// `HERMES_JOBS_PER_KEY`: a key's scheduled jobs.
    JobsPerKey,
    /// `HERMES_JOB_MIN_INTERVAL_SECS`: a schedule, or a run now, closer than the minimum.
    JobInterval,
    /// `HERMES_AGENT_FACTS_PER_USER`: the facts agents remembered about one user.
    AgentFacts,
}

impl TenantLimit {
    pub const ALL: [TenantLimit; 3] = [
        TenantLimit::JobsPerKey,
        TenantLimit::JobInterval,
        TenantLimit::AgentFacts,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TenantLimit::JobsPerKey => "jobs_per_key",
            TenantLimit::JobInterval => "job_interval",
            TenantLimit::AgentFacts => "agent_facts",
        }
    }
}

fn histogram(r: &Registry, name: &str, help: &str) -> HistogramVec {
    histogram_vec(r, name, help, &["agent"], AGENT_LATENCY.to_vec())
}

/// The outcomes of `hermes_agent_held_runs_total`.
pub const HELD_OUTCOMES: &[&str] = &["held", "released"];

/// The outcomes of `hermes_agent_runs_total`.
pub const RUN_OUTCOMES: &[&str] = &["answered", "failed", "expired"];

impl AgentMetrics {
    /// Start every series of an external agent at 0 (its runs by outcome, re-wakes, presence
    /// expiries, and its two latency histograms), so rules over `increase()` and
    /// `histogram_quantile()` see the agent before its first event.
    pub fn touch_agent(&self, agent: &str) {
        for outcome in RUN_OUTCOMES {
            self.runs.with_label_values(&[agent, outcome]);
        }
        self.rewakes.with_label_values(&[agent]);
        for outcome in HELD_OUTCOMES {
            self.held_runs.with_label_values(&[agent, outcome]);
        }
        self.presence_expired.with_label_values(&[agent]);
        self.time_to_ack.with_label_values(&[agent]);
        self.time_to_answer.with_label_values(&[agent]);
    }

    /// Count a request refused by `limit`.
    pub fn refused(&self, limit: TenantLimit) {
        self.limit_refusals
            .with_label_values(&[limit.as_str()])
            .inc();
    }

    /// Register the agent contract's metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        let limit_refusals = counter(
            r,
            "hermes_tenant_limit_refusals_total",
            "Requests refused because a tenant's limit was reached, by limit (jobs_per_key, job_interval, agent_facts).",
            &["limit"],
        );
        for limit in TenantLimit::ALL {
            limit_refusals.with_label_values(&[limit.as_str()]);
        }
        Self {
            limit_refusals,
            runs: counter(
                r,
                "hermes_agent_runs_total",
                "External agent runs that ended, by agent and outcome (answered, failed, expired).",
                &["agent", "outcome"],
            ),
            time_to_ack: histogram(
                r,
                "hermes_agent_time_to_ack_seconds",
                "Time from an external run's dispatch to the agent's inbox.ack, by agent.",
            ),
            time_to_answer: histogram(
                r,
                "hermes_agent_time_to_answer_seconds",
                "Time from an external run's dispatch to the agent's answer, by agent.",
            ),
            rewakes: counter(
                r,
                "hermes_agent_rewakes_total",
                "Unacknowledged external runs woken again on the retry schedule, by agent.",
                &["agent"],
            ),
            held_runs: counter(
                r,
                "hermes_agent_held_runs_total",
                "Runs assigned to a BUSY or OFFLINE external agent, by agent and outcome (held, released).",
                &["agent", "outcome"],
            ),
            presence_expired: counter(
                r,
                "hermes_agent_presence_expired_total",
                "Agents marked OFFLINE after no 2xx and no heartbeat for the presence window, by agent.",
                &["agent"],
            ),
            mcp_calls: counter(
                r,
                "hermes_mcp_calls_total",
                "Tool calls on the agent MCP surface, by tool and outcome (ok or the error code).",
                &["tool", "outcome"],
            ),
            mcp_jwt: counter(
                r,
                "hermes_mcp_jwt_total",
                "JWT bearers on /api/mcp, by outcome (accepted, or why refused: expired, future_dated, audience, algorithm, ...).",
                &["outcome"],
            ),
            forge_wakes: counter(
                r,
                "hermes_forge_wakes_total",
                "Forge wakes received on /agents/forge, by outcome (queued, duplicate, or the refusal's code).",
                &["outcome"],
            ),
            draft_updates: counter(
                r,
                "hermes_agent_draft_updates_total",
                "External agents' draft updates handled by delivery, by outcome (shown, edited, skipped, dropped).",
                &["outcome"],
            ),
        }
    }
}
