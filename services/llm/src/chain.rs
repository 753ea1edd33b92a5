//! Failover along a tier's chain of logical models: each is tried in order on retryable
//! failures (429, 5xx, timeouts, connection errors) within one overall deadline; a refused
//! request stops the chain. The error of the last attempt is what the caller learns.

use std::time::{Duration, Instant};

use hermes_shared::config::Config;
use hermes_shared::model::LlmRequest;
use hermes_shared::telemetry::Metrics;

use crate::providers::{CallSpec, Completion, Provider, ProviderError};

/// A successful call: the answer and the logical model that gave it.
pub struct Answered {
    pub completion: Completion,
    pub backend: String,
}

/// Call the chain of `req` until one backend answers or the deadline passes.
pub async fn call(
    provider: &Provider,
    config: &Config,
    metrics: &Metrics,
    req: &LlmRequest,
) -> Result<Answered, ProviderError> {
    let deadline = Instant::now() + config.llm_timeout;
    let tier = req.tier.as_str();
    let mut last = ProviderError::Malformed("the tier has no model chain".into());
    for (i, backend) in req.chain.iter().enumerate() {
        let Some(spec) = config.file.models.get(backend) else {
            last = ProviderError::Malformed(format!("model {backend:?} is not configured"));
            continue;
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining < Duration::from_millis(50) {
            last = ProviderError::Timeout(config.llm_timeout);
            break;
        }
        if i > 0 {
            metrics.llm_fallbacks.with_label_values(&[tier]).inc();
        }
        let model_id = match (&config.provider.model_override, provider) {
            (_, Provider::Mock(_)) => "mock",
            (Some(m), _) => m.as_str(),
            (None, _) => spec.id.as_str(),
        };
        // The mock never calls tools, so do not offer them to it.
        let tools = if matches!(provider, Provider::Mock(_)) {
            &[][..]
        } else {
            &req.tools[..]
        };
        let started = Instant::now();
        let result = provider
            .complete(&CallSpec {
                model_id,
                max_tokens: spec.max_output_tokens,
                messages: &req.messages,
                tools,
                timeout: remaining,
            })
            .await;
        metrics
            .llm_duration
            .with_label_values(&[backend])
            .observe(started.elapsed().as_secs_f64());
        match result {
            Ok(mut completion) => {
                // The mock answers for free whatever logical model it stands in for.
                if !matches!(provider, Provider::Mock(_)) {
                    let u = &completion.usage;
                    completion.usage.cost_micro_usd =
                        spec.cost_micro_usd(u.input_tokens, u.output_tokens);
                }
                metrics
                    .llm_cost
                    .with_label_values(&[backend, tier])
                    .inc_by(completion.usage.cost_micro_usd as f64 / 1_000_000.0);
                metrics.llm_calls.with_label_values(&[backend, tier]).inc();
                metrics
                    .llm_tokens
                    .with_label_values(&[backend, "input"])
                    .inc_by(completion.usage.input_tokens);
                metrics
                    .llm_tokens
                    .with_label_values(&[backend, "output"])
                    .inc_by(completion.usage.output_tokens);
                return Ok(Answered {
                    completion,
                    backend: backend.clone(),
                });
            }
            Err(e) => {
                metrics
                    .llm_errors
                    .with_label_values(&[backend, e.reason()])
                    .inc();
                tracing::warn!(backend, provider = provider.name(), error = %e, "model call failed");
                let stop = !e.retryable();
                last = e;
                if stop {
                    break;
                }
            }
        }
    }
    Err(last)
}
