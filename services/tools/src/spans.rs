//! The span of each tool call, by OpenTelemetry's GenAI conventions
//! (docs/tracing.md#the-span-tree-of-one-message): `execute_tool {name}`, the tool's name and call id, the MCP server it belongs to,
//! how long it waited for an operator's approval, and how it ended. Its arguments and
//! result go into the span only with `HERMES_TRACE_CONTENT=true`.

use tracing::Span;
use tracing::field::Empty;

use hermes_db::approvals::Approval;
use hermes_telemetry::trace::{TARGET, content};
use hermes_types::model::ToolCall;

/// The span of `call`; `server` is its MCP server, `answered` the approvals of its round.
pub(crate) fn tool(call: &ToolCall, server: Option<&str>, answered: &[Approval]) -> Span {
    let waited_ms = answered
        .iter()
        .find(|a| a.call_id == call.id)
        .and_then(|a| {
            a.decided_at
                .map(|at| (at - a.created_at).num_milliseconds().max(0))
        });
    let span = tracing::info_span!(
        target: TARGET,
        "execute_tool",
        otel.name = %format!("execute_tool {}", call.name),
        otel.kind = "internal",
        otel.status_code = Empty,
        error.type = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = if server.is_some() { "extension" } else { "function" },
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        hermes.mcp.server = server,
        hermes.approval.wait_ms = waited_ms,
        hermes.tool.outcome = Empty,
    );
    if content() {
        span.record(
            "gen_ai.tool.call.arguments",
            call.arguments.to_string().as_str(),
        );
    }
    span
}

/// How the call ended, on the current span (the call's).
pub(crate) fn finish(outcome: &str, failed: bool, result: &str) {
    let span = Span::current();
    span.record("hermes.tool.outcome", outcome);
    if failed {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", outcome);
    }
    if content() {
        span.record("gen_ai.tool.call.result", result);
    }
}
