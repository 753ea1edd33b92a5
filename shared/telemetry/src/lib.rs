//! Telemetry (docs/architecture.md#12-observability): structured logs with the run id on every line, and the Prometheus
//! metrics of the whole fleet (served by the runtime crate's admin server).

mod agent_metrics;
mod alert_kind;
mod front_door_metrics;
mod limit_metrics;
mod metrics;
mod operator_metrics;
mod run_metrics;

pub use agent_metrics::{AgentMetrics, TenantLimit};
pub use alert_kind::AlertKind;
pub use front_door_metrics::FrontDoorMetrics;
pub use limit_metrics::LimitMetrics;
pub use metrics::{Inner as MetricHandles, Metrics};
pub use operator_metrics::OperatorMetrics;
pub use run_metrics::RunMetrics;

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
