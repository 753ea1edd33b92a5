//! Export of finished spans: the SDK's batch processor behind a gate that counts what it
//! drops, and the OTLP exporter over http/protobuf (through reqwest, the fleet's HTTP client)
//! or gRPC. A collector that is down or slow costs the exporter's thread, never a message:
//! a span that finds the queue full is dropped and counted (docs/tracing.md, "What tracing
//! costs").

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::Context;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Span, SpanData, SpanExporter, SpanProcessor,
};
use prometheus::IntCounterVec;

use hermes_config::{OtlpExport, OtlpProtocol};

/// The largest collector answer read (a partial-success message is a few hundred bytes).
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Why a finished span never reached the collector (the `reason` of
/// `hermes_trace_spans_dropped_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The export queue was full (`OTEL_BSP_MAX_QUEUE_SIZE`): the collector is slow or down.
    QueueFull,
    /// The collector refused or never answered the batch it was in.
    ExportFailed,
}

impl DropReason {
    pub const ALL: [DropReason; 2] = [DropReason::QueueFull, DropReason::ExportFailed];

    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::ExportFailed => "export_failed",
        }
    }
}

/// reqwest as OpenTelemetry's HTTP client. The batch processor exports from a thread of its
/// own, outside the runtime whose reactor reqwest needs, so each request runs on the
/// process's runtime and the exporter's thread waits for it.
#[derive(Debug)]
struct Reqwest {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for Reqwest {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let (parts, body) = request.into_parts();
            let mut response = client
                .request(parts.method, parts.uri.to_string())
                .headers(parts.headers)
                .body(body)
                .send()
                .await?;
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(HttpError::from("the collector's answer is too large"));
                }
                body.extend_from_slice(&chunk);
            }
            let mut out = http::Response::new(Bytes::from(body));
            *out.status_mut() = response.status();
            *out.headers_mut() = std::mem::take(response.headers_mut());
            Ok::<_, HttpError>(out)
        });
        sent.await?
    }
}

/// How many finished spans wait for export: counted in on the way into the SDK's queue and
/// out when the exporter takes them, so the gate knows the queue is full before the SDK
/// does and can count the drop.
#[derive(Clone, Debug)]
struct Queued(Arc<AtomicUsize>);

/// The batch processor behind a gate of the same capacity.
#[derive(Debug)]
struct Gate {
    inner: BatchSpanProcessor,
    queued: Queued,
    capacity: usize,
    dropped: IntCounterVec,
}

impl SpanProcessor for Gate {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if self.queued.0.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            self.queued.0.fetch_sub(1, Ordering::AcqRel);
            self.dropped
                .with_label_values(&[DropReason::QueueFull.as_str()])
                .inc();
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The OTLP exporter, counting spans out of the gate and the batches that fail.
#[derive(Debug)]
struct Counted {
    inner: opentelemetry_otlp::SpanExporter,
    queued: Queued,
    dropped: IntCounterVec,
}

impl SpanExporter for Counted {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let n = batch.len();
        self.queued.0.fetch_sub(n, Ordering::AcqRel);
        let result = self.inner.export(batch).await;
        if result.is_err() {
            self.dropped
                .with_label_values(&[DropReason::ExportFailed.as_str()])
                .inc_by(n as u64);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The processor that exports to `export`; must be called inside the tokio runtime (the
/// HTTP requests and the gRPC channel run on it).
pub(super) fn processor(
    export: &OtlpExport,
    dropped: IntCounterVec,
) -> Result<impl SpanProcessor + 'static, String> {
    let exporter = match export.protocol {
        OtlpProtocol::HttpProtobuf => {
            let client = hermes_net::http::client_builder(hermes_net::http::USER_AGENT)
                .timeout(export.timeout)
                .build()
                .map_err(|e| format!("cannot build the OTLP HTTP client: {e}"))?;
            let headers: HashMap<String, String> = export.header_pairs().into_iter().collect();
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(Reqwest {
                    client,
                    runtime: tokio::runtime::Handle::current(),
                })
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(export.endpoint.as_str())
                .with_timeout(export.timeout)
                .with_headers(headers)
                .build()
        }
        OtlpProtocol::Grpc => {
            let mut metadata = tonic::metadata::MetadataMap::new();
            for (k, v) in export.header_pairs() {
                let key = tonic::metadata::AsciiMetadataKey::from_bytes(
                    k.to_ascii_lowercase().as_bytes(),
                );
                let value = tonic::metadata::AsciiMetadataValue::try_from(v.as_str());
                let (Ok(key), Ok(value)) = (key, value) else {
                    return Err(format!(
                        "OTEL_EXPORTER_OTLP_HEADERS: {k:?} is not a valid gRPC header"
                    ));
                };
                metadata.insert(key, value);
            }
            opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(export.endpoint.as_str())
                .with_timeout(export.timeout)
                .with_metadata(metadata)
                .build()
        }
    }
    .map_err(|e| {
        format!(
            "cannot build the OTLP exporter for {}: {e}",
            export.endpoint
        )
    })?;
    let queued = Queued(Arc::new(AtomicUsize::new(0)));
    let counted = Counted {
        inner: exporter,
        queued: queued.clone(),
        dropped: dropped.clone(),
    };
    let config = BatchConfigBuilder::default()
        .with_max_queue_size(export.max_queue_size)
        .with_scheduled_delay(export.schedule_delay)
        .build();
    Ok(Gate {
        inner: BatchSpanProcessor::builder(counted)
            .with_batch_config(config)
            .build(),
        queued,
        capacity: export.max_queue_size,
        dropped,
    })
}
