//! Telemetry (docs/architecture.md §12): structured logs with the run id on every line, and the Prometheus
//! metrics of the whole fleet (served by the runtime crate's admin server).

mod agent_metrics;
mod alert_kind;
mod metrics;

pub use agent_metrics::AgentMetrics;
pub use alert_kind::AlertKind;
pub use metrics::{Inner as MetricHandles, Metrics};

use tracing_subscriber::EnvFilter;

use hermes_config::LogFormat;

/// Install the global log subscriber (once; later calls are no-ops, which tests rely on).
pub fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new("info,lapin=warn,amq_protocol=warn,tokio_postgres=warn")
    });
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
