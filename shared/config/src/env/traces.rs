//! Traces over OTLP (docs/tracing.md): the standard `OTEL_*` variables of the OpenTelemetry
//! specification that Hermes honours, read here like every other setting so `doctor`, `--help`
//! and the reference list them, and Hermes' own privacy and link settings. Tracing is off
//! unless an endpoint is set.

use std::time::Duration;

use secrecy::SecretString;
use url::Url;

use super::Unset::{Means, Value};
use super::{Kind, kinds, settings};
use crate::traces::{OtlpProtocol, Sampler};

/// `http/protobuf` or `grpc` (the specification's names).
const PROTOCOL: Kind<OtlpProtocol> = Kind {
    parse: |name, value| match value {
        "http/protobuf" => Ok(OtlpProtocol::HttpProtobuf),
        "grpc" => Ok(OtlpProtocol::Grpc),
        other => Err(vec![format!(
            "{name}={other:?} must be http/protobuf or grpc (http/json is not supported)"
        )]),
    },
    show: |p| p.as_str().to_string(),
};

/// One of the specification's sampler names that Hermes supports.
const SAMPLER: Kind<Sampler> = Kind {
    parse: |name, value| {
        Sampler::ALL
            .iter()
            .find(|s| s.as_str() == value)
            .copied()
            .ok_or_else(|| {
                let names: Vec<&str> = Sampler::ALL.iter().map(|s| s.as_str()).collect();
                vec![format!(
                    "{name}={value:?} must be one of {}",
                    names.join(", ")
                )]
            })
    },
    show: |s| s.as_str().to_string(),
};

/// A probability from 0 to 1.
const RATIO: Kind<f64> = Kind {
    parse: |name, value| match value.parse::<f64>() {
        Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(vec![format!(
            "{name}={value:?} must be a number from 0 to 1"
        )]),
    },
    show: |v| v.to_string(),
};

/// `key=value,key=value` with percent-encoded values (W3C Baggage's format, which the
/// specification uses for headers and resource attributes); checked here, split by
/// [`crate::traces::pairs`].
fn key_values(name: &str, value: &str) -> Result<(), Vec<String>> {
    let bad: Vec<String> = value
        .split(',')
        .filter(|item| !item.trim().is_empty())
        .filter(|item| match item.split_once('=') {
            Some((k, _)) => k.trim().is_empty(),
            None => true,
        })
        .map(|item| format!("{name} has an item without `key=value`: {:?}", item.trim()))
        .collect();
    if bad.is_empty() { Ok(()) } else { Err(bad) }
}

/// Headers may carry a collector's API key: shown masked.
const HEADERS: Kind<SecretString> = Kind {
    parse: |name, value| key_values(name, value).map(|()| SecretString::from(value.to_string())),
    show: |_| "******** (set)".into(),
};

/// Resource attributes are not secret.
const ATTRIBUTES: Kind<String> = Kind {
    parse: |name, value| key_values(name, value).map(|()| value.to_string()),
    show: Clone::clone,
};

/// A URL template holding `{trace_id}`.
const LINK_TEMPLATE: Kind<String> = Kind {
    parse: |name, value| {
        if value.contains("{trace_id}") && Url::parse(&value.replace("{trace_id}", "0")).is_ok() {
            Ok(value.to_string())
        } else {
            Err(vec![format!(
                "{name} must be a URL holding {{trace_id}}, e.g. http://localhost:16686/trace/{{trace_id}}"
            )])
        }
    },
    show: Clone::clone,
};

settings! {
    /// Traces (OpenTelemetry over OTLP).
    SETTINGS = [
        OTEL_EXPORTER_OTLP_ENDPOINT: Url {
            kind: kinds::HTTP_URL,
            unset: Means("(none: traces off)"),
            secret: false,
            help: "the OTLP collector, e.g. `http://localhost:4318` (http/protobuf: `/v1/traces` is appended) or `http://localhost:4317` (grpc); setting it turns tracing on (docs/tracing.md)",
        },
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: Url {
            kind: kinds::HTTP_URL,
            unset: Means("(none: the endpoint above)"),
            secret: false,
            help: "the traces endpoint, used as it is (no path appended); wins over `OTEL_EXPORTER_OTLP_ENDPOINT` and also turns tracing on",
        },
        OTEL_EXPORTER_OTLP_PROTOCOL: OtlpProtocol {
            kind: PROTOCOL,
            unset: Value("http/protobuf"),
            secret: false,
            help: "how spans are sent: `http/protobuf` or `grpc`",
        },
        OTEL_EXPORTER_OTLP_HEADERS: SecretString {
            kind: HEADERS,
            unset: Means("(none)"),
            secret: true,
            help: "headers of every export, `key=value,key=value` (values percent-encoded), e.g. a collector's API key",
        },
        OTEL_EXPORTER_OTLP_TIMEOUT: Duration {
            kind: kinds::MILLIS,
            unset: Value("10000"),
            secret: false,
            help: "milliseconds one export may take; a slow collector costs the exporter's thread this, never a message",
        },
        OTEL_SERVICE_NAME: String {
            kind: kinds::TEXT,
            unset: Means("(`hermes-<service>`, e.g. `hermes-router`)"),
            secret: false,
            help: "the `service.name` of every span",
        },
        OTEL_RESOURCE_ATTRIBUTES: String {
            kind: ATTRIBUTES,
            unset: Means("(none)"),
            secret: false,
            help: "more resource attributes, `key=value,key=value`, e.g. `deployment.environment.name=prod`",
        },
        OTEL_TRACES_SAMPLER: Sampler {
            kind: SAMPLER,
            unset: Value("parentbased_traceidratio"),
            secret: false,
            help: "which traces are kept: `parentbased_traceidratio` (a caller's sampled `traceparent` is honoured, new traces kept at the ratio), `traceidratio`, `parentbased_always_on`, `always_on`, `always_off`",
        },
        OTEL_TRACES_SAMPLER_ARG: f64 {
            kind: RATIO,
            unset: Value("1.0"),
            secret: false,
            help: "the ratio of the ratio samplers, from 0 to 1 (`0.1` keeps one new trace in ten)",
        },
        OTEL_BSP_SCHEDULE_DELAY: Duration {
            kind: kinds::MILLIS,
            unset: Value("5000"),
            secret: false,
            help: "milliseconds between two exports of the batch of finished spans",
        },
        OTEL_BSP_MAX_QUEUE_SIZE: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("2048"),
            secret: false,
            help: "finished spans held for export; past it new ones are dropped and counted (`hermes_trace_spans_dropped_total`), never waited for",
        },
        HERMES_TRACE_CONTENT: bool {
            kind: kinds::BOOL,
            unset: Value("false"),
            secret: false,
            help: "a privacy choice: `true` puts message text, tool arguments and results, and chat ids in span attributes; `false` keeps only sizes, names and counts",
        },
        HERMES_TRACE_LINK: String {
            kind: LINK_TEMPLATE,
            unset: Means("(none: the trace id alone)"),
            secret: false,
            help: "the URL of a trace in your tracing UI, with `{trace_id}`, printed by `hermes runs show` (e.g. `http://localhost:16686/trace/{trace_id}` for Jaeger)",
        },
    ]
}
