//! Logs and traces (docs/architecture.md#12-observability, docs/tracing.md): the process's one
//! `tracing` subscriber, with the log layer (JSON or text, `RUST_LOG`) and, when an OTLP
//! endpoint is set, the OpenTelemetry layer that turns Hermes' spans into one trace per
//! message. Spans made only for traces use the target [`TARGET`], which the log layer
//! skips, so a log line keeps the fields of its stage's span (`run_id`, `trace_id`,
//! `span_id`); logs never become span events, so nothing a log says reaches a collector.
//! Integer attributes are recorded as `i64`: tracing-opentelemetry has no unsigned visitor and
//! would send a `u64` field as text.

mod context;
mod export;
mod sampled;

pub use context::{adopt, current_or, parent_context, set_strings, traceparent_of};
pub use export::DropReason;
pub use sampled::{follows_unsampled, untraced};

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler as SdkSampler, SdkTracerProvider};
use prometheus::{IntCounterVec, Opts};
use tracing::Metadata;
use tracing_subscriber::filter::{EnvFilter, FilterExt, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

use hermes_config::{LogFormat, OtlpExport, Sampler, TraceSettings};

pub use hermes_types::trace::TARGET;

/// The filter of log lines when `RUST_LOG` is not set.
pub const DEFAULT_LOG_FILTER: &str = "info,lapin=warn,amq_protocol=warn,tokio_postgres=warn";

/// `HERMES_TRACE_CONTENT`, set once by [`init`].
static CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether message text, tool arguments and chat ids may go into span attributes
/// (`HERMES_TRACE_CONTENT`: a privacy choice, off unless set).
pub fn content() -> bool {
    CONTENT.load(Ordering::Relaxed)
}

/// `hermes_trace_spans_dropped_total{reason}`: one counter per process, since the tracer
/// provider is one per process; [`crate::Metrics`] registers it in every registry.
pub(crate) static DROPPED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let counter = IntCounterVec::new(
        Opts::new(
            "hermes_trace_spans_dropped_total",
            "Finished spans never exported, by reason (queue_full: the collector is slow or down; export_failed)",
        ),
        &["reason"],
    )
    .expect("valid metric");
    for reason in DropReason::ALL {
        counter.with_label_values(&[reason.as_str()]);
    }
    counter
});

/// The process's tracing, to be shut down (flushing what is queued) before it exits.
#[must_use = "shut it down before the process exits, or queued spans are lost"]
pub struct Tracing {
    provider: Option<SdkTracerProvider>,
}

impl Tracing {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Export what is queued (within the processor's bound) and stop the exporter.
    pub async fn shutdown(self) {
        if let Some(provider) = self.provider {
            // The SDK's shutdown blocks its caller until the exporter's thread is done.
            let _ = tokio::task::spawn_blocking(move || {
                if let Err(e) = provider.shutdown_with_timeout(Duration::from_secs(5)) {
                    tracing::warn!(error = %e, "traces not all exported at shutdown");
                }
            })
            .await;
        }
    }
}

/// Install the process's subscriber (once; later calls leave the first in place, which
/// tests rely on): logs in `format` filtered by `RUST_LOG` (else `default_filter`), and,
/// when `settings` name an endpoint, spans exported over OTLP as `service`'s (unless
/// `OTEL_SERVICE_NAME` says otherwise). Must run inside the tokio runtime when exporting.
pub fn init(
    format: LogFormat,
    default_filter: &str,
    settings: &TraceSettings,
    service: &str,
) -> Result<Tracing, String> {
    CONTENT.store(settings.content, Ordering::Relaxed);
    sampled::set_sampler(settings.export.as_ref().map(|e| e.sampler));
    let provider = match &settings.export {
        Some(export) => Some(provider(export, service)?),
        None => None,
    };
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter));
    let logged = filter_fn(|m: &Metadata<'_>| m.target() != TARGET);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Json => fmt
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_filter(filter.and(logged))
            .boxed(),
        LogFormat::Text => fmt
            .with_target(false)
            .with_filter(filter.and(logged))
            .boxed(),
    };
    let traces = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("hermes"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            // Both act at every poll of an instrumented future, not once per span: activation
            // pushes the span's OpenTelemetry context onto a thread-local (Hermes propagates
            // through `tracing` spans and never reads that context), and inactivity tracking
            // reads the clock twice to export busy and idle times nobody asked for.
            .with_context_activation(false)
            .with_tracked_inactivity(false)
            .with_filter(sampled::Traced)
            .boxed()
    });
    let installed = Registry::default()
        .with(traces)
        .with(logs)
        .try_init()
        .is_ok();
    match (installed, provider) {
        (true, provider) => Ok(Tracing { provider }),
        // A subscriber was already installed (a test's second fleet): this one's spans
        // would go nowhere.
        (false, Some(provider)) => {
            let _ = provider.shutdown();
            Ok(Tracing { provider: None })
        }
        (false, None) => Ok(Tracing { provider: None }),
    }
}

/// The tracer provider of `export`.
fn provider(export: &OtlpExport, service: &str) -> Result<SdkTracerProvider, String> {
    let processor = export::processor(export, DROPPED.clone())?;
    let name = export
        .service_name
        .clone()
        .unwrap_or_else(|| service.to_string());
    let mut attributes: Vec<KeyValue> = export
        .resource_pairs()
        .into_iter()
        .map(|(k, v)| KeyValue::new(k, v))
        .collect();
    attributes.push(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    let resource = Resource::builder_empty()
        .with_attributes(attributes)
        .with_service_name(name)
        .build();
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(sampler(export.sampler, export.sampler_arg))
        .with_resource(resource)
        .build())
}

/// The SDK's sampler for the specification's name.
fn sampler(sampler: Sampler, ratio: f64) -> SdkSampler {
    let parent_based = |root| SdkSampler::ParentBased(Box::new(root));
    match sampler {
        Sampler::AlwaysOn => SdkSampler::AlwaysOn,
        Sampler::AlwaysOff => SdkSampler::AlwaysOff,
        Sampler::TraceIdRatio => SdkSampler::TraceIdRatioBased(ratio),
        Sampler::ParentBasedAlwaysOn => parent_based(SdkSampler::AlwaysOn),
        Sampler::ParentBasedAlwaysOff => parent_based(SdkSampler::AlwaysOff),
        Sampler::ParentBasedTraceIdRatio => parent_based(SdkSampler::TraceIdRatioBased(ratio)),
    }
}
