//! The span of each model call, by OpenTelemetry's GenAI conventions
//! (docs/tracing.md#the-span-tree-of-one-message): `chat {model}`, the operation, provider and models, the token counts and
//! finish reasons, and Hermes' own cost, failover hop and cache hit. Text goes into a span
//! only with `HERMES_TRACE_CONTENT=true`.

use tracing::Span;
use tracing::field::Empty;

use hermes_telemetry::trace::{TARGET, content, set_strings};
use hermes_types::backend::BackendKind;

use crate::chain::Hop;
use crate::providers::{Adapter, Completion, ProviderError};

/// The `gen_ai.provider.name` of a backend: the convention's well-known value where it has
/// one, else the backend's own name.
fn provider_name(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::Gemini => "gcp.gemini",
        other => other.as_str(),
    }
}

/// The span of one try of `hop`, the `index`-th hop of the call's chain (0: the first).
pub(crate) fn model_call(
    hop: &Hop,
    tier: &str,
    index: usize,
    max_tokens: u32,
    streamed: bool,
) -> Span {
    tracing::info_span!(
        target: TARGET,
        "chat",
        otel.name = %format!("chat {}", hop.model_id),
        otel.kind = "client",
        otel.status_code = Empty,
        error.type = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider_name(hop.backend.kind()),
        gen_ai.request.model = %hop.model_id,
        gen_ai.request.max_tokens = i64::from(max_tokens),
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.output.messages = Empty,
        hermes.llm.backend = %hop.label,
        hermes.llm.tier = tier,
        hermes.llm.failover_hop = index as i64,
        hermes.llm.streamed = streamed,
        hermes.llm.cache_hit = false,
        hermes.llm.cost_micro_usd = Empty,
    )
}

/// What the model answered, on its span.
pub(crate) fn answered(span: &Span, hop: &Hop, completion: &Completion) {
    let u = completion.usage;
    span.record("gen_ai.response.model", hop.model_id.as_str());
    span.record("gen_ai.usage.input_tokens", u.input_tokens as i64);
    span.record("gen_ai.usage.output_tokens", u.output_tokens as i64);
    span.record("hermes.llm.cost_micro_usd", u.cost_micro_usd as i64);
    set_strings(
        span,
        "gen_ai.response.finish_reasons",
        vec![completion.finish_reason.as_str().to_string()],
    );
    if content()
        && let Some(text) = &completion.text
    {
        span.record("gen_ai.output.messages", text.as_str());
    }
}

/// A failed try, on its span.
pub(crate) fn failed(span: &Span, error: &ProviderError) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", error.reason());
}

/// An answer from the response cache: a call span of the model that gave it, with no tokens.
pub(crate) fn cache_hit(backend: &str, tier: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "chat",
        otel.name = %format!("chat {backend}"),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.usage.input_tokens = 0i64,
        gen_ai.usage.output_tokens = 0i64,
        hermes.llm.backend = backend,
        hermes.llm.tier = tier,
        hermes.llm.cache_hit = true,
    )
}
