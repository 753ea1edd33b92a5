//! Telemetry (docs/architecture.md#12-observability): structured logs with the run id on every line, and the Prometheus
//! metrics of the whole fleet (served by the runtime crate's admin server).

mod agent_metrics;
mod alert_kind;
mod budget_metrics;
mod bus_metrics;
mod delivery_metrics;
mod front_door_metrics;
mod http_metrics;
mod limit_metrics;
mod llm_metrics;
mod metrics;
mod operator_metrics;
mod process_metrics;
mod router_metrics;
mod run_metrics;
mod stage_metrics;
mod tool_metrics;

pub use agent_metrics::{AgentMetrics, TenantLimit};
pub use alert_kind::AlertKind;
pub use budget_metrics::BudgetMetrics;
pub use bus_metrics::BusMetrics;
pub use delivery_metrics::DeliveryMetrics;
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

use tracing_subscriber::EnvFilter;

use hermes_config::LogFormat;

/// Install the global log subscriber (once; later calls are no-ops, which tests rely on).
pub fn init_tracing(format: LogFormat) {
    init_tracing_at(
        format,
        "info,lapin=warn,amq_protocol=warn,tokio_postgres=warn",
    );
}

/// [`init_tracing`] with another filter when `RUST_LOG` is not set (`hermes mcp serve`
/// logs only warnings unless asked for more: its client shows stderr to people).
pub fn init_tracing_at(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Text => builder.with_target(false).try_init(),
    };
}
