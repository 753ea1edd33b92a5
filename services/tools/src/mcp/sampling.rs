//! `sampling/createMessage` from an MCP server, served by our own models within the
//! server's `[mcp_servers.<name>.sampling]` limits: enabled flag, model override,
//! `allowed_models`, `max_tokens_cap`, `timeout`, `max_rpm` (sliding minute), and an audit
//! line per request at `log_level`. Tool use inside sampling is not offered: a request
//! carrying tools is refused, so no sampling loop ever runs a tool round.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_config::{AuditLevel, McpSamplingSettings};
use hermes_telemetry::ToolMetrics;
use hermes_types::sync;

/// One sampling request in our terms.
#[derive(Clone, Debug, Default)]
pub struct SamplingRequest {
    /// `(is_assistant, text)` turns, oldest first.
    pub turns: Vec<(bool, String)>,
    pub system: Option<String>,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    /// Model names the server hinted at, in preference order.
    pub hints: Vec<String>,
    /// Whether the server offered tools for the model to call.
    pub wants_tools: bool,
}

/// The model's answer.
#[derive(Clone, Debug)]
pub struct SamplingAnswer {
    pub text: String,
    pub model: String,
    pub stop_reason: String,
    /// Tokens the call used, as the model reported them.
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Why a sampling request was not served.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SamplingError {
    #[error("sampling is disabled for this server")]
    Disabled,
    #[error("sampling rate limit reached ({0} requests per minute)")]
    RateLimited(u32),
    #[error("tool use in sampling is not offered by this client")]
    ToolsRefused,
    #[error("no model is available for sampling")]
    NoModel,
    #[error("the model did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the model call failed: {0}")]
    Failed(String),
}

impl SamplingError {
    /// The `outcome` label of `hermes_mcp_sampling_requests_total`.
    pub fn outcome(&self) -> &'static str {
        match self {
            SamplingError::Disabled => "disabled",
            SamplingError::RateLimited(_) => "rate_limited",
            SamplingError::ToolsRefused => "tools_refused",
            SamplingError::NoModel => "no_model",
            SamplingError::Timeout(_) => "timeout",
            SamplingError::Failed(_) => "failed",
        }
    }
}

/// Boxed future of a model call.
pub type CompleteFuture<'a> =
    Pin<Box<dyn Future<Output = Result<SamplingAnswer, String>> + Send + 'a>>;

/// What answers a sampling request with a logical model of our configuration.
pub trait Complete: Send + Sync {
    /// Configured logical model names.
    fn models(&self) -> Vec<String>;
    /// The model used when neither the configuration nor the server picks one.
    fn default_model(&self) -> Option<String>;
    fn complete<'a>(&'a self, model: &'a str, request: &'a SamplingRequest) -> CompleteFuture<'a>;
}

/// The sampling side of one server.
pub struct Sampler {
    server: String,
    settings: McpSamplingSettings,
    llm: Arc<dyn Complete>,
    recent: Mutex<VecDeque<Instant>>,
    metrics: ToolMetrics,
}

impl Sampler {
    pub fn new(
        server: String,
        settings: McpSamplingSettings,
        llm: Arc<dyn Complete>,
        metrics: ToolMetrics,
    ) -> Self {
        Self {
            server,
            settings,
            llm,
            recent: Mutex::new(VecDeque::new()),
            metrics,
        }
    }

    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// The model for `request`: the configured override, else the first hint that is a
    /// configured and allowed model, else the first allowed model, else the default.
    fn pick_model(&self, request: &SamplingRequest) -> Option<String> {
        if let Some(model) = &self.settings.model {
            return Some(model.clone());
        }
        let configured = self.llm.models();
        let allowed = |m: &String| {
            configured.contains(m)
                && (self.settings.allowed_models.is_empty()
                    || self.settings.allowed_models.contains(m))
        };
        request
            .hints
            .iter()
            .find(|h| allowed(h))
            .cloned()
            .or_else(|| {
                self.settings
                    .allowed_models
                    .iter()
                    .find(|m| allowed(m))
                    .cloned()
            })
            .or_else(|| self.llm.default_model().filter(allowed))
    }

    /// Count a request in the sliding minute; false when `max_rpm` is reached.
    fn admit(&self, now: Instant) -> bool {
        let mut recent = sync::lock(&self.recent);
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(60))
        {
            recent.pop_front();
        }
        if recent.len() >= self.settings.max_rpm as usize {
            return false;
        }
        recent.push_back(now);
        true
    }

    /// Serve one request within the limits.
    pub async fn sample(
        &self,
        mut request: SamplingRequest,
    ) -> Result<SamplingAnswer, SamplingError> {
        let result = self.sample_inner(&mut request).await;
        let server = self.server.as_str();
        let (label, outcome, tokens_in, tokens_out) = match &result {
            Ok(a) => (
                "answered",
                format!("answered by {}", a.model),
                a.input_tokens,
                a.output_tokens,
            ),
            Err(e) => (e.outcome(), e.to_string(), 0, 0),
        };
        let m = &self.metrics;
        m.sampling_requests
            .with_label_values(&[server, label])
            .inc();
        m.sampling_tokens
            .with_label_values(&[server, "input"])
            .inc_by(tokens_in);
        m.sampling_tokens
            .with_label_values(&[server, "output"])
            .inc_by(tokens_out);
        // The audit line: who asked, how much, what it used, what happened; never the prompt.
        let (turns, max_tokens) = (request.turns.len(), request.max_tokens);
        // One line at the configured level; `tracing` takes the level as a constant.
        macro_rules! audit {
            ($level:ident) => {
                tracing::$level!(
                    server,
                    turns,
                    max_tokens,
                    tokens_in,
                    tokens_out,
                    outcome,
                    "MCP sampling request"
                )
            };
        }
        match self.settings.log_level {
            AuditLevel::Debug => audit!(debug),
            AuditLevel::Info => audit!(info),
            AuditLevel::Warning => audit!(warn),
        }
        result
    }

    async fn sample_inner(
        &self,
        request: &mut SamplingRequest,
    ) -> Result<SamplingAnswer, SamplingError> {
        if !self.settings.enabled {
            return Err(SamplingError::Disabled);
        }
        if request.wants_tools {
            return Err(SamplingError::ToolsRefused);
        }
        if !self.admit(Instant::now()) {
            return Err(SamplingError::RateLimited(self.settings.max_rpm));
        }
        let model = self.pick_model(request).ok_or(SamplingError::NoModel)?;
        request.max_tokens = request.max_tokens.min(self.settings.max_tokens_cap).max(1);
        let timeout = Duration::from_secs_f64(self.settings.timeout);
        match tokio::time::timeout(timeout, self.llm.complete(&model, request)).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(SamplingError::Failed(e)),
            Err(_) => Err(SamplingError::Timeout(timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what it was asked and answers at once (or never, for `slow`).
    struct Recorder {
        asked: Mutex<Vec<(String, u32)>>,
        slow: bool,
    }

    impl Complete for Recorder {
        fn models(&self) -> Vec<String> {
            vec!["small".into(), "big".into()]
        }
        fn default_model(&self) -> Option<String> {
            Some("small".into())
        }
        fn complete<'a>(
            &'a self,
            model: &'a str,
            request: &'a SamplingRequest,
        ) -> CompleteFuture<'a> {
            Box::pin(async move {
                self.asked
                    .lock()
                    .unwrap()
                    .push((model.to_owned(), request.max_tokens));
                if self.slow {
                    std::future::pending::<()>().await;
                }
                Ok(SamplingAnswer {
                    text: "ok".into(),
                    model: model.into(),
                    stop_reason: "endTurn".into(),
                    input_tokens: 7,
                    output_tokens: 2,
                })
            })
        }
    }

    fn sampler(settings: McpSamplingSettings, slow: bool) -> (Sampler, Arc<Recorder>) {
        let rec = Arc::new(Recorder {
            asked: Mutex::new(Vec::new()),
            slow,
        });
        let metrics = hermes_telemetry::Metrics::new().tools.clone();
        (
            Sampler::new("s".into(), settings, rec.clone(), metrics),
            rec,
        )
    }

    fn count(s: &Sampler, outcome: &str) -> u64 {
        s.metrics
            .sampling_requests
            .with_label_values(&["s", outcome])
            .get()
    }

    fn ask(hints: &[&str], max_tokens: u32) -> SamplingRequest {
        SamplingRequest {
            turns: vec![(false, "hi".into())],
            max_tokens,
            hints: hints.iter().map(|h| h.to_string()).collect(),
            ..SamplingRequest::default()
        }
    }

    #[tokio::test]
    async fn caps_tokens_and_picks_allowed_models() {
        let (s, rec) = sampler(
            McpSamplingSettings {
                max_tokens_cap: 100,
                allowed_models: vec!["big".into()],
                ..McpSamplingSettings::default()
            },
            false,
        );
        s.sample(ask(&["small", "big"], 5000)).await.unwrap();
        s.sample(ask(&["gpt-unknown"], 50)).await.unwrap();
        assert_eq!(
            *rec.asked.lock().unwrap(),
            [("big".to_owned(), 100), ("big".to_owned(), 50)]
        );
        let (s, rec) = sampler(
            McpSamplingSettings {
                model: Some("small".into()),
                ..McpSamplingSettings::default()
            },
            false,
        );
        s.sample(ask(&["big"], 10)).await.unwrap();
        assert_eq!(rec.asked.lock().unwrap()[0].0, "small", "the override wins");
    }

    #[tokio::test]
    async fn refuses_when_disabled_over_the_rate_with_tools_or_too_slow() {
        let (s, _) = sampler(
            McpSamplingSettings {
                enabled: false,
                ..McpSamplingSettings::default()
            },
            false,
        );
        assert_eq!(
            s.sample(ask(&[], 10)).await.unwrap_err(),
            SamplingError::Disabled
        );

        let (s, rec) = sampler(
            McpSamplingSettings {
                max_rpm: 2,
                ..McpSamplingSettings::default()
            },
            false,
        );
        s.sample(ask(&[], 10)).await.unwrap();
        s.sample(ask(&[], 10)).await.unwrap();
        assert_eq!(
            s.sample(ask(&[], 10)).await.unwrap_err(),
            SamplingError::RateLimited(2)
        );
        let mut with_tools = ask(&[], 10);
        with_tools.wants_tools = true;
        assert_eq!(
            s.sample(with_tools).await.unwrap_err(),
            SamplingError::ToolsRefused
        );
        assert_eq!(rec.asked.lock().unwrap().len(), 2);
        // Counted by outcome, and only answered calls' reported tokens, not the cap asked for.
        let counts = ["answered", "rate_limited", "tools_refused"].map(|o| count(&s, o));
        assert_eq!(counts, [2, 1, 1]);
        let tokens = |d: &str| s.metrics.sampling_tokens.with_label_values(&["s", d]).get();
        assert_eq!((tokens("input"), tokens("output")), (14, 4));

        let (s, _) = sampler(
            McpSamplingSettings {
                timeout: 0.2,
                ..McpSamplingSettings::default()
            },
            true,
        );
        assert!(matches!(
            s.sample(ask(&[], 10)).await.unwrap_err(),
            SamplingError::Timeout(_)
        ));
    }
}
