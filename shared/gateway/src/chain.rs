//! Failover along a call's hops (the agent's pinned backend, then the tier's chain of
//! logical models), within one overall deadline. A hop is tried on the failures that
//! [`ProviderError::fails_over`] names; a short `Retry-After` is waited out once on the same
//! hop; a backend without tools is skipped when the request carries tools. For a streamed
//! call the decision is made before the first byte reaches the caller: once text has been
//! forwarded, a broken stream fails the call instead of starting over elsewhere.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hermes_config::ModelSpec;
use hermes_telemetry::Metrics;
use hermes_types::model::{CallParams, ChatMessage, ToolSpec};

use hermes_telemetry::trace::TARGET;
use tracing::Instrument;

use crate::providers::{Adapter, Backend, CallSpec, Completion, DeltaSink, ProviderError};
use crate::spans;

/// One place a call may go: a backend and the model asked of it.
pub struct Hop {
    /// The metric label: the logical model name, or `agent:<backend>` for an override.
    pub label: String,
    pub backend: Backend,
    pub model_id: String,
    /// Output cap of this model.
    pub max_tokens: u32,
    /// What the model costs (`None`: unpriced, recorded as free).
    pub prices: Option<ModelSpec>,
}

/// A hop that could not be built (no key for its backend, an unknown model).
pub struct Unusable {
    pub label: String,
    pub why: String,
}

/// The request part of a call.
pub struct Ask<'a> {
    pub tier: &'a str,
    pub messages: &'a [ChatMessage],
    pub tools: &'a [ToolSpec],
    pub params: &'a CallParams,
}

/// The limits of one call.
pub struct Limits {
    pub deadline: Instant,
    pub attempt_timeout: Duration,
    pub first_token_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_retry_after: Duration,
}

/// A successful call: the answer, which hop gave it, and how long was spent waiting on
/// providers (for the overhead metric).
pub struct Answered {
    pub completion: Completion,
    pub backend: String,
    pub provider_time: Duration,
}

/// A failed call: the last error and the provider time spent on the way.
pub struct Failed {
    pub error: ProviderError,
    pub provider_time: Duration,
}

/// Forwards deltas and remembers whether any reached the caller.
struct Forwarded<'a> {
    inner: &'a dyn DeltaSink,
    started: AtomicBool,
}

impl DeltaSink for Forwarded<'_> {
    fn delta(&self, text: &str) {
        self.started.store(true, Ordering::Relaxed);
        self.inner.delta(text);
    }
}

/// Call the hops in order until one answers, the deadline passes, or a failure that would
/// fail anywhere stops the chain. Usage is priced here; failed attempts are not billed.
pub async fn call(
    hops: &[Result<Hop, Unusable>],
    ask: &Ask<'_>,
    limits: &Limits,
    stream: Option<&dyn DeltaSink>,
    metrics: &Metrics,
) -> Result<Answered, Failed> {
    let mut last = ProviderError::Malformed("the tier has no model chain".into());
    let mut provider_time = Duration::ZERO;
    let forwarded = stream.map(|inner| Forwarded {
        inner,
        started: AtomicBool::new(false),
    });
    let mut tried = 0usize;
    for hop in hops {
        let hop = match hop {
            Ok(h) => h,
            Err(u) => {
                tracing::warn!(backend = %u.label, why = %u.why, "backend skipped");
                last = ProviderError::Malformed(format!("{}: {}", u.label, u.why));
                continue;
            }
        };
        if !ask.tools.is_empty() && !hop.backend.supports_tools() {
            tracing::debug!(backend = %hop.label, "backend takes no tools; skipped");
            last = ProviderError::Malformed(format!(
                "{} does not support tools and the request carries tools",
                hop.label
            ));
            continue;
        }
        if tried > 0 {
            metrics.llm.fallbacks.with_label_values(&[ask.tier]).inc();
        }
        tried += 1;
        let mut waited_retry_after = false;
        loop {
            let remaining = limits.deadline.saturating_duration_since(Instant::now());
            if remaining < Duration::from_millis(20) {
                return Err(Failed {
                    error: ProviderError::Timeout(limits.attempt_timeout.min(remaining)),
                    provider_time,
                });
            }
            let timeout = remaining.min(limits.attempt_timeout);
            let spec = CallSpec {
                model_id: &hop.model_id,
                max_tokens: ask
                    .params
                    .max_tokens
                    .map_or(hop.max_tokens, |m| m.min(hop.max_tokens)),
                messages: ask.messages,
                tools: ask.tools,
                params: ask.params,
                timeout,
                first_token_timeout: limits.first_token_timeout.min(timeout),
                idle_timeout: limits.idle_timeout.min(timeout),
            };
            let started = Instant::now();
            let span = spans::model_call(
                hop,
                ask.tier,
                tried - 1,
                spec.max_tokens,
                forwarded.is_some(),
            );
            let result = match &forwarded {
                Some(f) => {
                    let call = hop.backend.stream(&spec, f).instrument(span.clone());
                    match tokio::time::timeout(timeout, call).await {
                        Ok(r) => r,
                        Err(_) => Err(ProviderError::Timeout(timeout)),
                    }
                }
                None => {
                    let call = hop.backend.complete(&spec).instrument(span.clone());
                    match tokio::time::timeout(timeout, call).await {
                        Ok(r) => r,
                        Err(_) => Err(ProviderError::Timeout(timeout)),
                    }
                }
            };
            let took = started.elapsed();
            provider_time += took;
            metrics
                .llm
                .duration
                .with_label_values(&[&hop.label])
                .observe(took.as_secs_f64());
            match result {
                Ok(mut completion) => {
                    let u = completion.usage;
                    completion.usage.cost_micro_usd = hop
                        .prices
                        .as_ref()
                        .map_or(0, |p| p.cost_micro_usd(u.input_tokens, u.output_tokens));
                    record_success(metrics, &hop.label, ask.tier, &completion);
                    spans::answered(&span, hop, &completion);
                    return Ok(Answered {
                        completion,
                        backend: hop.label.clone(),
                        provider_time,
                    });
                }
                Err(e) => {
                    spans::failed(&span, &e);
                    metrics
                        .llm
                        .errors
                        .with_label_values(&[&hop.label, e.reason()])
                        .inc();
                    // A provider's error body may quote (part of) a key: scrubbed before it is logged.
                    let error = hermes_net::redact::redact(&e.to_string(), &[]);
                    tracing::warn!(backend = %hop.label, kind = %hop.backend.kind(), %error, "model call failed");
                    let mid_stream = forwarded
                        .as_ref()
                        .is_some_and(|f| f.started.load(Ordering::Relaxed));
                    if mid_stream {
                        // The caller already has part of this answer: no other backend
                        // may continue it.
                        return Err(Failed {
                            error: e,
                            provider_time,
                        });
                    }
                    if let ProviderError::RateLimited {
                        retry_after: Some(wait),
                    } = &e
                        && !waited_retry_after
                        && *wait <= limits.max_retry_after
                        && Instant::now() + *wait + Duration::from_millis(20) < limits.deadline
                    {
                        waited_retry_after = true;
                        // The wait is an event of the refused try's span; the next try has its own.
                        span.in_scope(|| {
                            tracing::info!(target: TARGET, retry_after_ms = wait.as_millis() as u64, "retry");
                        });
                        tokio::time::sleep(*wait).await;
                        continue;
                    }
                    let stop = !e.fails_over();
                    last = e;
                    if stop {
                        return Err(Failed {
                            error: last,
                            provider_time,
                        });
                    }
                    break;
                }
            }
        }
    }
    Err(Failed {
        error: last,
        provider_time,
    })
}

fn record_success(metrics: &Metrics, label: &str, tier: &str, completion: &Completion) {
    let u = completion.usage;
    metrics
        .llm
        .cost
        .with_label_values(&[label, tier])
        .inc_by(u.cost_micro_usd as f64 / 1_000_000.0);
    metrics.llm.calls.with_label_values(&[label, tier]).inc();
    metrics
        .llm
        .tokens
        .with_label_values(&[label, "input"])
        .inc_by(u.input_tokens);
    metrics
        .llm
        .tokens
        .with_label_values(&[label, "output"])
        .inc_by(u.output_tokens);
}
