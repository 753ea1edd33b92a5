//! The one chokepoint every model call passes (docs/models-and-budgets.md, the gateway), in
//! order: the killswitch and global spend cap → the hops of the call → the response cache
//! → the user's token budget, the API key's budgets and a Forge run's workspace budget → a
//! call slot (bounded wait) → the
//! failover chain → settle the budgets, add the spend, cache the answer. Everything it does beyond waiting on providers
//! is measured as `hermes_llm_overhead_seconds`.

use hermes_types::ids::UserId;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_config::Config;
use hermes_runtime::Ctx;
use hermes_telemetry::Metrics;
use hermes_types::model::{FailureCode, LlmRequest, Usage};
use tokio::sync::Semaphore;

use crate::backends::{Backends, SecretsUnreadable};
use crate::budget::{self, Budgets, Refusal};
use crate::chain::{self, Ask, Hop, Limits, Unusable};
use crate::providers::{Completion, DeltaSink, ProviderError};
use crate::response_cache::{self, Cached, ResponseCache};

/// An answered call.
pub struct Served {
    pub completion: Completion,
    /// The hop that answered (the logical model name, or `agent:<backend>`).
    pub backend: String,
    pub cache_hit: bool,
    /// Time spent in the gateway beyond waiting for a slot and on providers.
    pub overhead: Duration,
}

/// Why a call got no answer.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("refused before any provider was asked: {}", .0.as_str())]
    Refused(Refusal),
    #[error("every model-call slot stayed busy for {0:?}")]
    Capacity(Duration),
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The workspace's provider keys could not be read; no provider was asked.
    #[error(transparent)]
    WorkspaceSecrets(#[from] SecretsUnreadable),
    /// The caller's input cannot be sent (an image URL that cannot be fetched or is not an
    /// image); no provider was asked. The text is ours and names what to fix.
    #[error("invalid input: {0}")]
    Input(String),
}

impl GatewayError {
    /// The failure code the caller is told.
    pub fn code(&self) -> FailureCode {
        match self {
            GatewayError::Refused(
                Refusal::UserDaily
                | Refusal::UserMonthly
                | Refusal::KeyDaily
                | Refusal::KeyMonthly
                | Refusal::ForgeDaily,
            ) => FailureCode::BudgetExceeded,
            GatewayError::Refused(Refusal::BudgetUnavailable) => FailureCode::BudgetUnavailable,
            GatewayError::Refused(Refusal::GlobalCap | Refusal::Killswitch) => {
                FailureCode::SpendingPaused
            }
            GatewayError::Capacity(_) => FailureCode::Capacity,
            GatewayError::Provider(e) if e.fails_over() => FailureCode::ProvidersUnavailable,
            GatewayError::Provider(_) => FailureCode::ProviderRejected,
            GatewayError::WorkspaceSecrets(_) => FailureCode::WorkspaceSecretsUnavailable,
            GatewayError::Input(_) => FailureCode::Invalid,
        }
    }

    /// What went wrong, for logs and the run's record (operators only): this error's text
    /// with credentials scrubbed, since a provider's error body may quote (part of) a key.
    pub fn detail(&self) -> String {
        hermes_net::redact::redact(&self.to_string(), &[])
    }

    /// What the end user reads: a sentence per failure code, never a provider's own text.
    pub fn user_message(&self) -> String {
        match self {
            GatewayError::Refused(Refusal::UserDaily) => {
                "You've reached today's usage limit for your plan. It resets at midnight UTC — \
                 or upgrade for a bigger allowance."
                    .into()
            }
            GatewayError::Refused(Refusal::UserMonthly) => {
                "You've reached this month's usage limit for your plan. Upgrade for a bigger \
                 allowance."
                    .into()
            }
            GatewayError::Refused(Refusal::KeyDaily) => {
                "This API key has used today's budget. It resets at midnight UTC.".into()
            }
            GatewayError::Refused(Refusal::KeyMonthly) => {
                "This API key has used this month's budget.".into()
            }
            GatewayError::Refused(Refusal::ForgeDaily) => {
                "This workspace's Forge runs have used today's budget. It resets at midnight UTC."
                    .into()
            }
            GatewayError::Refused(Refusal::BudgetUnavailable) => {
                "I can't check your usage allowance right now, so I can't answer. Please try \
                 again in a minute."
                    .into()
            }
            GatewayError::Refused(Refusal::GlobalCap | Refusal::Killswitch) => {
                "I'm paused for maintenance right now. Please try again later.".into()
            }
            GatewayError::Capacity(_) => {
                "I'm handling a lot of messages right now. Please try again in a moment.".into()
            }
            GatewayError::Provider(_) => crate::RETRY_MESSAGE.into(),
            GatewayError::WorkspaceSecrets(_) => {
                "I can't reach this assistant's model keys right now, so I can't answer. \
                 Please try again later."
                    .into()
            }
            GatewayError::Input(why) => why.clone(),
        }
    }
}

/// Counts a call in `hermes_llm_in_flight` for as long as it holds a slot, including when
/// its future is dropped mid-call (a stopping stage).
struct InFlight<'a>(&'a prometheus::IntGauge);

impl<'a> InFlight<'a> {
    fn new(gauge: &'a prometheus::IntGauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Who else than a user a call's usage is settled to: its API key, its Forge run's
/// workspace (each when that has a budget).
#[derive(Clone, Copy, Debug, Default)]
struct Metered {
    key: Option<hermes_types::ids::ApiKeyId>,
    forge: Option<hermes_types::ids::WorkspaceId>,
}

/// The gateway of one process.
#[derive(Clone)]
pub struct Gateway {
    config: Arc<Config>,
    metrics: Metrics,
    backends: Backends,
    budgets: Budgets,
    keys: budget::KeyBudgets,
    forge: budget::ForgeBudgets,
    cache: Option<ResponseCache>,
    slots: Arc<Semaphore>,
}

impl Gateway {
    /// The gateway of `ctx`'s configuration. Fails, naming the variables, when no provider
    /// is usable.
    pub fn new(ctx: &Ctx) -> anyhow::Result<Self> {
        let backends = Backends::new(ctx.config.clone(), Some(ctx.db.clone()))?;
        backends.check()?;
        Ok(Self::with_parts(
            ctx.config.clone(),
            ctx.metrics.clone(),
            backends,
            ctx.cache.clone(),
            Some(ctx.db.clone()),
        ))
    }

    /// A gateway over explicit parts (benchmarks and tests). Without `db` budgets, spend and
    /// the killswitch live in Redis alone (docs/models-and-budgets.md, where budgets live).
    pub fn with_parts(
        config: Arc<Config>,
        metrics: Metrics,
        backends: Backends,
        cache: hermes_cache::Cache,
        db: Option<hermes_db::Db>,
    ) -> Self {
        let llm = &config.llm;
        let response_cache = llm
            .cache
            .enabled
            .then(|| ResponseCache::new(cache.clone(), Duration::from_secs(llm.cache.ttl_secs)));
        // Series whose labels are known now start at 0, so dashboards and rate() alerts see
        // them before the first event: every refusal scope, and per tier its fallbacks and
        // the cache hits of each model of its chain.
        for scope in Refusal::ALL
            .iter()
            .map(|r| r.as_str())
            .chain(["capacity", "workspace_secrets"])
        {
            metrics.budgets.rejections.with_label_values(&[scope]);
        }
        for (tier, chain) in &config.tiers {
            metrics.llm.fallbacks.with_label_values(&[tier.as_str()]);
            for model in chain {
                metrics
                    .llm
                    .cache_hits
                    .with_label_values(&[model.as_str(), tier.as_str()]);
            }
        }
        Self {
            keys: budget::KeyBudgets::new(db.clone()),
            forge: budget::ForgeBudgets::new(db.clone(), config.forge.budget),
            budgets: Budgets::new(cache, db, metrics.clone(), &config),
            slots: Arc::new(Semaphore::new(llm.max_concurrent)),
            cache: response_cache,
            backends,
            metrics,
            config,
        }
    }

    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }

    pub fn backends(&self) -> &Backends {
        &self.backends
    }

    /// Answer `req`. `user` is charged against its tier's token budget (`None`: not
    /// metered per user, as for the OpenAI-compatible API's callers, metered per key
    /// instead); `stream` receives text as it arrives.
    pub async fn complete(
        &self,
        req: &LlmRequest,
        user: Option<UserId>,
        stream: Option<&dyn DeltaSink>,
    ) -> Result<Served, GatewayError> {
        let started = Instant::now();
        let deadline = started + self.config.llm.call_timeout;
        let tier = req.tier.as_str();
        let mut waited = Duration::ZERO;
        let mut provider_time = Duration::ZERO;
        let result = self
            .serve(req, user, stream, deadline, &mut waited, &mut provider_time)
            .await;
        if let Err(GatewayError::Refused(r)) = &result {
            self.metrics
                .budgets
                .rejections
                .with_label_values(&[r.as_str()])
                .inc();
        }
        if let Err(GatewayError::Capacity(_)) = &result {
            self.metrics
                .budgets
                .rejections
                .with_label_values(&["capacity"])
                .inc();
        }
        if let Err(GatewayError::WorkspaceSecrets(_)) = &result {
            self.metrics
                .budgets
                .rejections
                .with_label_values(&["workspace_secrets"])
                .inc();
        }
        if let Ok(s) = &result
            && s.cache_hit
        {
            self.metrics
                .llm
                .cache_hits
                .with_label_values(&[&s.backend, tier])
                .inc();
        }
        let overhead = started
            .elapsed()
            .saturating_sub(waited)
            .saturating_sub(provider_time);
        self.metrics.llm.overhead.observe(overhead.as_secs_f64());
        result.map(|s| Served { overhead, ..s })
    }

    async fn serve(
        &self,
        req: &LlmRequest,
        user: Option<UserId>,
        stream: Option<&dyn DeltaSink>,
        deadline: Instant,
        waited: &mut Duration,
        provider_time: &mut Duration,
    ) -> Result<Served, GatewayError> {
        let hops = self.backends.hops(req).await?;
        let cache_key = self.cache.as_ref().and_then(|_| {
            response_cache::key(&hops, &req.messages, &req.params, !req.tools.is_empty())
        });
        // The three pre-call lookups go to Redis at once (one round trip on the multiplexed
        // connection): the platform gate, the cache, and a speculative reservation that is
        // released if the gate refuses or the cache answers.
        let reserve = async {
            match user.zip(self.config.llm.budget(req.tier)) {
                Some((user, budget)) => {
                    let cap = hops
                        .iter()
                        .filter_map(|h| h.as_ref().ok())
                        .map(|h| h.max_tokens)
                        .max()
                        .unwrap_or(0);
                    let cap = req.params.max_tokens.map_or(cap, |m| m.min(cap));
                    let tokens = budget::estimate_tokens(&req.messages, &req.tools, cap);
                    self.budgets.reserve(user, budget, tokens).await.map(Some)
                }
                None => Ok(None),
            }
        };
        let lookup = async {
            match (&self.cache, &cache_key) {
                (Some(cache), Some(key)) => cache.get(key).await,
                _ => None,
            }
        };
        // The key's budgets and a Forge run's workspace budget (PostgreSQL) are read beside
        // them.
        let key_gate = async {
            let key = match req.api_key {
                Some(key) => self
                    .keys
                    .check(key)
                    .await
                    .map(|metered| metered.then_some(key))?,
                None => None,
            };
            let forge = match req.forge_workspace() {
                Some(ws) => self
                    .forge
                    .check(ws)
                    .await
                    .map(|metered| metered.then_some(ws))?,
                None => None,
            };
            Ok::<_, Refusal>(Metered { key, forge })
        };
        let (gate, hit, reservation, key_gate) =
            tokio::join!(self.budgets.check_global(), lookup, reserve, key_gate);
        // From here the reservation ends in `finish` on every path; an early exit (a panic, a
        // dropped future) releases it on drop.
        let (reservation, over_budget) = match reservation {
            Ok(r) => (r, None),
            Err(refusal) => (None, Some(refusal)),
        };
        // The platform gate refuses first; a cached answer needs no budget; then the user's
        // budget, then the key's.
        let (metered, over_key) = match key_gate {
            Ok(metered) => (metered, None),
            Err(refusal) => (Metered::default(), Some(refusal)),
        };
        let outcome = match (gate, hit, over_budget.or(over_key)) {
            (Err(refusal), _, _) => Err(GatewayError::Refused(refusal)),
            (Ok(()), Some(hit), _) => {
                let _span = crate::spans::cache_hit(&hit.backend, req.tier.as_str()).entered();
                Ok(Self::from_cache(hit, stream))
            }
            (Ok(()), None, Some(refusal)) => Err(GatewayError::Refused(refusal)),
            (Ok(()), None, None) => {
                self.call_chain(&hops, req, stream, deadline, waited, provider_time)
                    .await
            }
        };
        self.finish(outcome, reservation, metered, cache_key.as_deref())
            .await
    }

    /// A cached answer, free of charge; a streamed caller gets it as one delta.
    fn from_cache(hit: Cached, stream: Option<&dyn DeltaSink>) -> Served {
        if let (Some(sink), Some(text)) = (stream, hit.completion.text.as_deref()) {
            sink.delta(text);
        }
        let mut completion = hit.completion;
        completion.usage = Usage::default();
        Served {
            completion,
            backend: hit.backend,
            cache_hit: true,
            overhead: Duration::ZERO,
        }
    }

    /// Wait for a call slot (bounded), then walk the failover chain.
    async fn call_chain(
        &self,
        hops: &[Result<Hop, Unusable>],
        req: &LlmRequest,
        stream: Option<&dyn DeltaSink>,
        deadline: Instant,
        waited: &mut Duration,
        provider_time: &mut Duration,
    ) -> Result<Served, GatewayError> {
        let wait_started = Instant::now();
        let max_wait = self
            .config
            .llm
            .max_wait()
            .min(deadline.saturating_duration_since(wait_started));
        let permit = tokio::time::timeout(max_wait, self.slots.acquire()).await;
        *waited = wait_started.elapsed();
        self.metrics
            .llm
            .semaphore_wait
            .observe(waited.as_secs_f64());
        let Ok(Ok(_permit)) = permit else {
            return Err(GatewayError::Capacity(max_wait));
        };
        let in_flight = InFlight::new(&self.metrics.llm.in_flight);
        let llm = &self.config.llm;
        let answered = chain::call(
            hops,
            &Ask {
                tier: req.tier.as_str(),
                messages: &req.messages,
                tools: &req.tools,
                params: &req.params,
            },
            &Limits {
                deadline,
                attempt_timeout: llm.attempt_timeout(),
                first_token_timeout: llm.first_token_timeout(),
                idle_timeout: llm.stream_idle_timeout(),
                max_retry_after: llm.max_retry_after(),
            },
            stream,
            &self.metrics,
        )
        .await;
        drop(in_flight);
        drop(_permit);
        match answered {
            Ok(a) => {
                *provider_time = a.provider_time;
                Ok(Served {
                    completion: a.completion,
                    backend: a.backend,
                    cache_hit: false,
                    overhead: Duration::ZERO,
                })
            }
            Err(f) => {
                *provider_time = f.provider_time;
                Err(GatewayError::Provider(f.error))
            }
        }
    }

    /// The one place a call's reservation ends: settled at the real usage of a fresh
    /// answer, released (0 tokens) on every other outcome. The spend and the cache store of
    /// a fresh answer go in the same round trip.
    async fn finish(
        &self,
        outcome: Result<Served, GatewayError>,
        reservation: Option<budget::Reservation>,
        metered: Metered,
        cache_key: Option<&str>,
    ) -> Result<Served, GatewayError> {
        let fresh = outcome.as_ref().ok().filter(|s| !s.cache_hit);
        let usage = fresh.map(|s| s.completion.usage).unwrap_or_default();
        let settle = async {
            if let Some(r) = reservation {
                r.settle(usage.total()).await;
            }
            if let Some(key) = metered.key {
                self.keys.settle(key, usage).await;
            }
            if let Some(ws) = metered.forge {
                self.forge.settle(ws, usage).await;
            }
        };
        let store = async {
            if let (Some(cache), Some(key), Some(served)) = (&self.cache, cache_key, fresh)
                && served.completion.tool_calls.is_empty()
                && served.completion.text.is_some()
            {
                cache
                    .put(
                        key,
                        &Cached {
                            completion: served.completion.clone(),
                            backend: served.backend.clone(),
                        },
                    )
                    .await;
            }
        };
        tokio::join!(settle, self.budgets.add_spend(usage.cost_micro_usd), store);
        outcome
    }
}

#[cfg(feature = "testing")]
pub mod testing {
    //! Test support for the crates that call the gateway (the llm and tools stages'
    //! tests): a gateway over the mock provider and the local Redis. Production code
    //! never calls it.
    use super::*;

    /// The configuration (mock forced, unique namespace) and its gateway.
    pub fn mock(metrics: &Metrics) -> (Arc<Config>, Gateway) {
        with_vars(metrics, &[("HERMES_PROVIDER", "mock")])
    }

    /// The configuration and gateway of an OpenAI-compatible provider at `base_url` (a
    /// fake model the test serves), unique namespace.
    pub fn openai(metrics: &Metrics, base_url: &str) -> (Arc<Config>, Gateway) {
        with_vars(
            metrics,
            &[
                ("HERMES_PROVIDER", "openai"),
                ("OPENAI_API_KEY", "sk-test"),
                ("OPENAI_BASE_URL", base_url),
            ],
        )
    }

    /// The configuration with `vars` over the environment (unique namespace) and its gateway.
    fn with_vars(metrics: &Metrics, vars: &[(&str, &str)]) -> (Arc<Config>, Gateway) {
        let ns = format!("t{}", &uuid::Uuid::now_v7().simple().to_string()[20..]);
        let config = Arc::new(
            Config::from_lookup(
                &|k| match vars.iter().find(|(name, _)| *name == k) {
                    Some((_, value)) => Some((*value).to_owned()),
                    None if k == "HERMES_NAMESPACE" => Some(ns.clone()),
                    None => std::env::var(k).ok(),
                },
                None,
            )
            .unwrap(),
        );
        let cache =
            hermes_cache::Cache::new(&config.redis_url, config.namespace.clone(), metrics.clone())
                .unwrap();
        let backends = Backends::new(config.clone(), None).unwrap();
        let gateway = Gateway::with_parts(config.clone(), metrics.clone(), backends, cache, None);
        (config, gateway)
    }
}
