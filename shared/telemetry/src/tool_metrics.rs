//! The metrics of the tools stage (docs/tools-and-mcp.md): tool calls by outcome and their
//! time, calls refused before they ran, configuration reloads, MCP servers' sessions, and
//! the heartbeats and whole answers sent to a Forge, and MCP servers' sampling.

use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec, Registry};

use crate::metrics::{LATENCY, counter_vec, gauge_vec, histogram_vec};

/// The tools stage's metric handles.
#[derive(Clone)]
pub struct ToolMetrics {
    /// Tool calls by tool and outcome.
    pub calls: IntCounterVec,
    /// Time of one tool call by tool.
    pub duration: HistogramVec,
    /// Tool calls refused, never executed, by reason.
    pub refusals: IntCounterVec,
    /// `hermes tools reload` requests this replica handled, by outcome.
    pub reloads: IntCounterVec,
    /// 1 while this replica has a live session with the MCP server, by server.
    pub mcp_server_up: IntGaugeVec,
    /// `agents.heartbeat` calls to a Forge by the status sent and outcome (sent, failed).
    pub forge_heartbeats: IntCounterVec,
    /// Forge chat runs' whole answers by how their post ended.
    pub forge_answers: IntCounterVec,
    /// MCP servers' sampling requests by server and outcome.
    pub sampling_requests: IntCounterVec,
    /// Tokens sampling requests used, as the model reported them (not the cap asked for),
    /// by server and direction.
    pub sampling_tokens: IntCounterVec,
    /// `delegate_task_async` calls by outcome: `started` (a run in another workspace),
    /// `refused` (no run: a bad call), `resumed` (a round given back its runs' answers).
    pub delegations: IntCounterVec,
}

impl ToolMetrics {
    /// Register the tools stage's metrics in `r`.
    pub fn register(r: &Registry) -> Self {
        Self {
            calls: counter_vec(
                r,
                "hermes_tool_calls_total",
                "Tool calls by tool and outcome (ok, error, unknown_tool, timeout, refused).",
                &["tool", "outcome"],
            ),
            duration: histogram_vec(
                r,
                "hermes_tool_duration_seconds",
                "Time of one tool call by tool.",
                &["tool"],
                LATENCY.to_vec(),
            ),
            refusals: counter_vec(
                r,
                "hermes_tool_refusals_total",
                "Tool calls refused, never executed, by reason: not offered to the run, its engagement mode, its allowlist.",
                &["reason"],
            ),
            reloads: counter_vec(
                r,
                "hermes_tools_reloads_total",
                "`hermes tools reload` requests this replica handled, by outcome (applied, invalid, no_config_file).",
                &["outcome"],
            ),
            mcp_server_up: gauge_vec(
                r,
                "hermes_mcp_server_up",
                "1 while this replica has a live session with the MCP server, else 0.",
                &["server"],
            ),
            forge_heartbeats: counter_vec(
                r,
                "hermes_forge_heartbeats_total",
                "`agents.heartbeat` calls this replica made to a Forge, by the status sent (ONLINE, BUSY, OFFLINE) and outcome (sent, failed).",
                &["status", "outcome"],
            ),
            forge_answers: counter_vec(
                r,
                "hermes_forge_answers_total",
                "Whole answers of Forge chat runs posted to their thread, by outcome: posted, run_ended (the Forge's run had its reply already; settled, not retried), failed (one delivery's tries failed; requeued).",
                &["outcome"],
            ),
            sampling_requests: counter_vec(
                r,
                "hermes_mcp_sampling_requests_total",
                "Sampling requests from MCP servers, by server and outcome (answered, disabled, rate_limited, tools_refused, no_model, timeout, failed).",
                &["server", "outcome"],
            ),
            sampling_tokens: counter_vec(
                r,
                "hermes_mcp_sampling_tokens_total",
                "Tokens MCP servers' sampling requests used, as the model reported them, by server and direction (input, output).",
                &["server", "direction"],
            ),
            delegations: counter_vec(
                r,
                "hermes_delegations_total",
                "delegate_task_async calls by outcome: started (a run in another workspace), refused (a bad call: no run), resumed (a held round given back its runs' answers).",
                &["outcome"],
            ),
        }
    }
}
