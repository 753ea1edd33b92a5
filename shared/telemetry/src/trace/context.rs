//! The W3C `traceparent` of the envelope as OpenTelemetry context and back: a stage's span
//! continues the trace its message carries, and the messages it sends carry its span
//! (docs/tracing.md, "The span tree of one message").

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use hermes_types::trace::TraceParent;

/// `traceparent` as a remote parent.
pub fn parent_context(tp: &TraceParent) -> opentelemetry::Context {
    let (Ok(trace), Ok(span)) = (
        TraceId::from_hex(tp.trace_id()),
        SpanId::from_hex(tp.parent_id()),
    ) else {
        return opentelemetry::Context::new();
    };
    let flags = if tp.sampled() {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    let remote = SpanContext::new(trace, span, flags, true, TraceState::default());
    opentelemetry::Context::new().with_remote_span_context(remote)
}

/// The `traceparent` naming `span`, when it is an OpenTelemetry span (tracing on).
pub fn traceparent_of(span: &Span) -> Option<TraceParent> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    if !sc.is_valid() {
        return None;
    }
    TraceParent::from_parts(
        &sc.trace_id().to_string(),
        &sc.span_id().to_string(),
        sc.is_sampled(),
    )
}

/// Make `span` a child of `parent` (when there is one) and return the `traceparent` that
/// names `span` itself; `None` when tracing is off. Call it before `span` is entered: when
/// the sampler drops `span`, nothing made under it is traced (docs/tracing.md, "Sampling").
pub fn adopt(span: &Span, parent: Option<&TraceParent>) -> Option<TraceParent> {
    if let Some(parent) = parent {
        // Fails only when tracing is off or the span is filtered out: nothing to adopt then.
        let _ = span.set_parent(parent_context(parent));
    }
    let own = traceparent_of(span);
    if own.as_ref().is_some_and(|tp| !tp.sampled()) {
        super::sampled::mark_unsampled(span);
    }
    own
}

/// The `traceparent` of the innermost traced span around the caller (ingest's HTTP server
/// span, a stage's consumer span), or `fallback` when tracing is off.
pub fn current_or(fallback: impl FnOnce() -> TraceParent) -> TraceParent {
    traceparent_of(&Span::current()).unwrap_or_else(fallback)
}

/// Set a list of strings as one attribute of `span` (a `tracing` field holds one value;
/// conventions such as `gen_ai.response.finish_reasons` want an array).
pub fn set_strings(span: &Span, key: &'static str, values: Vec<String>) {
    let values: Vec<opentelemetry::StringValue> = values.into_iter().map(Into::into).collect();
    span.set_attribute(key, opentelemetry::Value::Array(values.into()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_becomes_a_remote_sampled_parent() {
        let tp =
            TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01").unwrap();
        let cx = parent_context(&tp);
        let sc = cx.span().span_context().clone();
        assert!(sc.is_remote() && sc.is_sampled());
        assert_eq!(sc.trace_id().to_string(), tp.trace_id());
        assert_eq!(sc.span_id().to_string(), tp.parent_id());
    }

    #[test]
    fn without_an_opentelemetry_layer_nothing_is_adopted() {
        let span = tracing::info_span!("untraced");
        assert_eq!(adopt(&span, Some(&TraceParent::generate())), None);
    }
}
