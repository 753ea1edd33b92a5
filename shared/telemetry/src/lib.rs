//! Telemetry (docs/architecture.md#12-observability): structured logs with the run id on every line, the Prometheus
//! metrics of the whole fleet (served by the runtime crate's admin server), and traces over
//! OTLP (`trace`, docs/tracing.md).

mod agent_metrics;
mod alert_kind;
mod budget_metrics;
mod bus_metrics;
mod delivery_metrics;
mod discord_gateway_metrics;
mod front_door_metrics;
mod http_metrics;
mod limit_metrics;
mod llm_metrics;
mod metrics;
mod operator_metrics;
mod process_metrics;
pub mod resources;
mod router_metrics;
mod run_metrics;
mod stage_metrics;
mod tool_metrics;

pub use agent_metrics::{AgentMetrics, TenantLimit};
pub use alert_kind::AlertKind;
pub use budget_metrics::BudgetMetrics;
pub use bus_metrics::BusMetrics;
pub use delivery_metrics::DeliveryMetrics;
pub use discord_gateway_metrics::DiscordGatewayMetrics;
pub use front_door_metrics::FrontDoorMetrics;
pub use http_metrics::HttpMetrics;
pub use limit_metrics::LimitMetrics;
pub use llm_metrics::LlmMetrics;
pub use metrics::{Inner as MetricHandles, Metrics};
pub use operator_metrics::OperatorMetrics;
pub use process_metrics::ProcessMetrics;
pub use router_metrics::RouterMetrics;
pub use run_metrics::RunMetrics;
pub use stage_metrics::StageMetrics;
pub use tool_metrics::ToolMetrics;

pub mod trace;

use hermes_config::{LogFormat, TraceSettings};

/// Install the global log subscriber without traces (once; later calls are no-ops, which
/// tests rely on). Services call [`trace::init`] instead.
pub fn init_tracing(format: LogFormat) {
    init_tracing_at(format, trace::DEFAULT_LOG_FILTER);
}

/// [`init_tracing`] with another filter when `RUST_LOG` is not set (`hermes mcp serve`
/// logs only warnings unless asked for more: its client shows stderr to people).
pub fn init_tracing_at(format: LogFormat, default_filter: &str) {
    // Without an endpoint nothing is exported, so nothing can fail.
    let _ = trace::init(format, default_filter, &TraceSettings::off(), "hermes");
}
