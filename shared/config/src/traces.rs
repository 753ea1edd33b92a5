//! The trace settings (docs/tracing.md): where spans go, how they are sampled and batched,
//! and whether message content may appear in them. Declared in `env/traces.rs`.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use url::Url;

use crate::env::{Reader, traces};

/// How spans reach the collector (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtlpProtocol {
    /// Protobuf over HTTP, to `{endpoint}/v1/traces`.
    HttpProtobuf,
    /// OTLP/gRPC.
    Grpc,
}

impl OtlpProtocol {
    /// The specification's name.
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::HttpProtobuf => "http/protobuf",
            OtlpProtocol::Grpc => "grpc",
        }
    }
}

/// Which traces are kept (`OTEL_TRACES_SAMPLER`), by the specification's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampler {
    AlwaysOn,
    AlwaysOff,
    TraceIdRatio,
    ParentBasedAlwaysOn,
    ParentBasedAlwaysOff,
    ParentBasedTraceIdRatio,
}

impl Sampler {
    /// Every supported sampler.
    pub const ALL: &[Sampler] = &[
        Sampler::AlwaysOn,
        Sampler::AlwaysOff,
        Sampler::TraceIdRatio,
        Sampler::ParentBasedAlwaysOn,
        Sampler::ParentBasedAlwaysOff,
        Sampler::ParentBasedTraceIdRatio,
    ];

    /// The specification's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Sampler::AlwaysOn => "always_on",
            Sampler::AlwaysOff => "always_off",
            Sampler::TraceIdRatio => "traceidratio",
            Sampler::ParentBasedAlwaysOn => "parentbased_always_on",
            Sampler::ParentBasedAlwaysOff => "parentbased_always_off",
            Sampler::ParentBasedTraceIdRatio => "parentbased_traceidratio",
        }
    }
}

/// Where and how spans are exported; present only when an endpoint is set.
#[derive(Clone, Debug)]
pub struct OtlpExport {
    /// The URL spans are sent to, resolved as the specification says: the traces endpoint
    /// as it is, or the generic one with `/v1/traces` appended for http/protobuf.
    pub endpoint: Url,
    pub protocol: OtlpProtocol,
    /// `OTEL_EXPORTER_OTLP_HEADERS`, unsplit (it may hold a key).
    pub headers: Option<SecretString>,
    /// The bound of one export.
    pub timeout: Duration,
    /// `OTEL_SERVICE_NAME`; `None` means `hermes-<service>`.
    pub service_name: Option<String>,
    /// `OTEL_RESOURCE_ATTRIBUTES`, unsplit.
    pub resource_attributes: Option<String>,
    pub sampler: Sampler,
    pub sampler_arg: f64,
    /// Between two exports of the batch.
    pub schedule_delay: Duration,
    /// Finished spans held for export before new ones are dropped.
    pub max_queue_size: usize,
}

/// Everything about traces.
#[derive(Clone, Debug)]
pub struct TraceSettings {
    /// `None`: no endpoint, tracing is off.
    pub export: Option<OtlpExport>,
    /// `HERMES_TRACE_CONTENT`: message text and arguments may go into attributes.
    pub content: bool,
    /// `HERMES_TRACE_LINK`: a URL with `{trace_id}`.
    pub link: Option<String>,
}

impl TraceSettings {
    /// Tracing off (what a process without an endpoint has).
    pub fn off() -> Self {
        Self {
            export: None,
            content: false,
            link: None,
        }
    }

    /// The link of `trace_id` in the configured UI, if one is configured.
    pub fn link_to(&self, trace_id: &str) -> Option<String> {
        self.link
            .as_ref()
            .map(|t| t.replace("{trace_id}", trace_id))
    }
}

impl OtlpExport {
    /// The headers as pairs (values percent-decoded).
    pub fn header_pairs(&self) -> Vec<(String, String)> {
        self.headers
            .as_ref()
            .map(|h| pairs(h.expose_secret()))
            .unwrap_or_default()
    }

    /// The resource attributes as pairs (values percent-decoded).
    pub fn resource_pairs(&self) -> Vec<(String, String)> {
        self.resource_attributes
            .as_deref()
            .map(pairs)
            .unwrap_or_default()
    }
}

/// `key=value,key=value` into pairs, keys and values trimmed and values percent-decoded
/// (the W3C Baggage format the specification uses for both lists).
pub fn pairs(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|item| item.split_once('='))
        .map(|(k, v)| {
            let v = v.trim();
            let decoded =
                url::form_urlencoded::parse(format!("v={}", v.replace('+', "%2B")).as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_else(|| v.to_string());
            (k.trim().to_string(), decoded)
        })
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// Read the trace settings; `None` when a variable was invalid (its problem is recorded).
pub(crate) fn read_traces(r: &mut Reader<'_>) -> Option<TraceSettings> {
    let endpoint = r.get(&traces::OTEL_EXPORTER_OTLP_ENDPOINT);
    let traces_endpoint = r.get(&traces::OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
    let protocol = r.get(&traces::OTEL_EXPORTER_OTLP_PROTOCOL);
    let headers = r.get(&traces::OTEL_EXPORTER_OTLP_HEADERS);
    let timeout = r.get(&traces::OTEL_EXPORTER_OTLP_TIMEOUT);
    let service_name = r.get(&traces::OTEL_SERVICE_NAME);
    let resource_attributes = r.get(&traces::OTEL_RESOURCE_ATTRIBUTES);
    let sampler = r.get(&traces::OTEL_TRACES_SAMPLER);
    let sampler_arg = r.get(&traces::OTEL_TRACES_SAMPLER_ARG);
    let schedule_delay = r.get(&traces::OTEL_BSP_SCHEDULE_DELAY);
    let max_queue_size = r.get(&traces::OTEL_BSP_MAX_QUEUE_SIZE);
    let content = r.get(&traces::HERMES_TRACE_CONTENT);
    let link = r.get(&traces::HERMES_TRACE_LINK);
    let protocol = protocol?;
    let endpoint = match (traces_endpoint, endpoint) {
        (Some(url), _) => Some(url),
        (None, Some(base)) => Some(match protocol {
            OtlpProtocol::HttpProtobuf => traces_path(base),
            OtlpProtocol::Grpc => base,
        }),
        (None, None) => None,
    };
    let export = match endpoint {
        Some(endpoint) => Some(OtlpExport {
            endpoint,
            protocol,
            headers,
            timeout: timeout?,
            service_name,
            resource_attributes,
            sampler: sampler?,
            sampler_arg: sampler_arg?,
            schedule_delay: schedule_delay?,
            max_queue_size: max_queue_size?,
        }),
        None => None,
    };
    Some(TraceSettings {
        export,
        content: content?,
        link,
    })
}

/// `base` with `v1/traces` appended to its path (the specification's rule for the generic
/// endpoint over HTTP).
fn traces_path(mut base: Url) -> Url {
    let path = format!("{}/v1/traces", base.path().trim_end_matches('/'));
    base.set_path(&path);
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generic_endpoint_gets_the_traces_path_over_http_only() {
        let base = Url::parse("http://collector:4318").unwrap();
        assert_eq!(
            traces_path(base).as_str(),
            "http://collector:4318/v1/traces"
        );
        let nested = Url::parse("http://collector:4318/otlp/").unwrap();
        assert_eq!(
            traces_path(nested).as_str(),
            "http://collector:4318/otlp/v1/traces"
        );
    }

    #[test]
    fn pairs_are_split_trimmed_and_percent_decoded() {
        assert_eq!(
            pairs("api-key=a%20b , x=1+2,=skipped,broken"),
            vec![
                ("api-key".to_string(), "a b".to_string()),
                ("x".to_string(), "1+2".to_string())
            ]
        );
    }
}
