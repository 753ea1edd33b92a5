//! The metrics of the tools stage (docs/tools-and-mcp.md): tool calls by outcome and their
//! time, calls refused before they ran, configuration reloads, and MCP servers' sessions.

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
        }
    }
}
