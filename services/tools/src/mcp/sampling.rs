//! `sampling/createMessage` from an MCP server, served by our own models within the
//! server's `[mcp_servers.<name>.sampling]` limits: enabled flag, model override,
//! `allowed_models`, `max_tokens_cap`, `timeout`, `max_rpm` (sliding minute),
//! `max_tool_rounds`, and an audit line per request at `log_level`.
//!
//! Tools in sampling (docs/tools-and-mcp.md, "Tools in sampling"): the server offers tools,
//! the model may answer with calls of them (`stopReason: "toolUse"`), the server runs them
//! and sends their results in its next request. The model sees only the tools
//! `sampling_policy` admits, and a call of any other tool is refused. Tool-use answers in a
//! row are counted per server (a text answer ends the loop); the one past
//! `max_tool_rounds` is refused, and the count starts again.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_config::AuditLevel;
use hermes_telemetry::ToolMetrics;
use hermes_types::model::{ChatMessage, ToolCall, ToolSpec};
use hermes_types::sync;

use super::sampling_policy::SamplingGate;

/// One sampling request in our terms.
#[derive(Clone, Debug, Default)]
pub struct SamplingRequest {
    /// The conversation, oldest first: user and assistant turns (an assistant turn may
    /// carry tool calls), and the results of those calls as tool turns.
    pub messages: Vec<ChatMessage>,
    pub system: Option<String>,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    /// Model names the server hinted at, in preference order.
    pub hints: Vec<String>,
    /// The tools the server offers, under its own names.
    pub tools: Vec<ToolSpec>,
    /// The server's `toolChoice`.
    pub tool_choice: ToolChoice,
}

/// The server's `toolChoice.mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model should call a tool: offered as `Auto` (the gateway has no forced choice).
    Required,
    /// The model must not call tools: none is offered.
    None,
}

/// The model's answer.
#[derive(Clone, Debug, Default)]
pub struct SamplingAnswer {
    pub text: String,
    /// The tools the model called (its stop reason is then `toolUse`).
    pub tool_calls: Vec<ToolCall>,
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
    #[error("tool use in sampling is off for this server (max_tool_rounds = 0)")]
    ToolsRefused,
    #[error("the sampling tool loop went past max_tool_rounds ({0} tool-use rounds in a row)")]
    ToolRoundsExceeded(u32),
    #[error("the model called {0:?}, a tool this server may not use in sampling")]
    ToolNotOffered(String),
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
            SamplingError::ToolRoundsExceeded(_) => "tool_rounds_exceeded",
            SamplingError::ToolNotOffered(_) => "tool_not_offered",
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
    /// The server's settings and which of its tools the model may see.
    gate: SamplingGate,
    llm: Arc<dyn Complete>,
    recent: Mutex<VecDeque<Instant>>,
    /// Tool-use answers in a row (a text answer resets it).
    tool_rounds: AtomicU32,
    metrics: ToolMetrics,
}

/// Tokens a model call used (zero when none was made).
#[derive(Default)]
struct Used {
    input: u64,
    output: u64,
}

impl Sampler {
    pub fn new(
        server: String,
        gate: SamplingGate,
        llm: Arc<dyn Complete>,
        metrics: ToolMetrics,
    ) -> Self {
        Self {
            server,
            gate,
            llm,
            recent: Mutex::new(VecDeque::new()),
            tool_rounds: AtomicU32::new(0),
            metrics,
        }
    }

    pub fn enabled(&self) -> bool {
        self.gate.settings.sampling.enabled
    }

    /// Whether the server may offer tools (the client's `sampling.tools` capability).
    pub fn offers_tools(&self) -> bool {
        self.enabled() && self.gate.settings.sampling.max_tool_rounds > 0
    }

    /// The model for `request`: the configured override, else the first hint that is a
    /// configured and allowed model, else the first allowed model, else the default.
    fn pick_model(&self, request: &SamplingRequest) -> Option<String> {
        let settings = &self.gate.settings.sampling;
        if let Some(model) = &settings.model {
            return Some(model.clone());
        }
        let configured = self.llm.models();
        let allowed = |m: &String| {
            configured.contains(m)
                && (settings.allowed_models.is_empty() || settings.allowed_models.contains(m))
        };
        request
            .hints
            .iter()
            .find(|h| allowed(h))
            .cloned()
            .or_else(|| settings.allowed_models.iter().find(|m| allowed(m)).cloned())
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
        if recent.len() >= self.gate.settings.sampling.max_rpm as usize {
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
        let offered = request.tools.len();
        let mut used = Used::default();
        let result = self.sample_inner(&mut request, &mut used).await;
        let server = self.server.as_str();
        let (label, outcome) = match &result {
            Ok(a) if a.tool_calls.is_empty() => ("answered", format!("answered by {}", a.model)),
            Ok(a) => (
                "answered",
                format!("{} tool call(s) by {}", a.tool_calls.len(), a.model),
            ),
            Err(e) => (e.outcome(), e.to_string()),
        };
        let (tokens_in, tokens_out) = (used.input, used.output);
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
        let (turns, max_tokens) = (request.messages.len(), request.max_tokens);
        let (tools_offered, tools_shown) = (offered, request.tools.len());
        // One line at the configured level; `tracing` takes the level as a constant.
        macro_rules! audit {
            ($level:ident) => {
                tracing::$level!(
                    server,
                    turns,
                    max_tokens,
                    tools_offered,
                    tools_shown,
                    tokens_in,
                    tokens_out,
                    outcome,
                    "MCP sampling request"
                )
            };
        }
        match self.gate.settings.sampling.log_level {
            AuditLevel::Debug => audit!(debug),
            AuditLevel::Info => audit!(info),
            AuditLevel::Warning => audit!(warn),
        }
        result
    }

    async fn sample_inner(
        &self,
        request: &mut SamplingRequest,
        used: &mut Used,
    ) -> Result<SamplingAnswer, SamplingError> {
        let settings = &self.gate.settings.sampling;
        if !settings.enabled {
            return Err(SamplingError::Disabled);
        }
        if !request.tools.is_empty() && settings.max_tool_rounds == 0 {
            return Err(SamplingError::ToolsRefused);
        }
        if !self.admit(Instant::now()) {
            return Err(SamplingError::RateLimited(settings.max_rpm));
        }
        let model = self.pick_model(request).ok_or(SamplingError::NoModel)?;
        request.max_tokens = request.max_tokens.min(settings.max_tokens_cap).max(1);
        request.tools = if request.tool_choice == ToolChoice::None {
            Vec::new()
        } else {
            let offered = std::mem::take(&mut request.tools);
            self.gate.admitted(&self.server, offered)
        };
        let timeout = Duration::from_secs_f64(settings.timeout);
        let answer = match tokio::time::timeout(timeout, self.llm.complete(&model, request)).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Err(SamplingError::Failed(e)),
            Err(_) => return Err(SamplingError::Timeout(timeout)),
        };
        (used.input, used.output) = (answer.input_tokens, answer.output_tokens);
        if answer.tool_calls.is_empty() {
            self.tool_rounds.store(0, Ordering::Relaxed);
            return Ok(answer);
        }
        // The server would run whatever the model names: only what it was shown.
        if let Some(call) = answer
            .tool_calls
            .iter()
            .find(|c| !request.tools.iter().any(|t| t.name == c.name))
        {
            return Err(SamplingError::ToolNotOffered(call.name.clone()));
        }
        let rounds = self.tool_rounds.fetch_add(1, Ordering::Relaxed) + 1;
        if rounds > settings.max_tool_rounds {
            self.tool_rounds.store(0, Ordering::Relaxed);
            return Err(SamplingError::ToolRoundsExceeded(settings.max_tool_rounds));
        }
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what it was asked and answers at once (or never, for `slow`): with a call of
    /// `calls` when set, else with text.
    struct Recorder {
        asked: Mutex<Vec<(String, u32, Vec<String>)>>,
        slow: bool,
        calls: Mutex<Option<String>>,
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
                let tools = request.tools.iter().map(|t| t.name.clone()).collect();
                self.asked
                    .lock()
                    .unwrap()
                    .push((model.to_owned(), request.max_tokens, tools));
                if self.slow {
                    std::future::pending::<()>().await;
                }
                let called = self.calls.lock().unwrap().clone();
                let tool_calls = called.into_iter().map(|name| ToolCall {
                    id: "t1".into(),
                    name,
                    arguments: serde_json::json!({}),
                    signature: None,
                });
                Ok(SamplingAnswer {
                    text: "ok".into(),
                    tool_calls: tool_calls.collect(),
                    model: model.into(),
                    stop_reason: "endTurn".into(),
                    input_tokens: 7,
                    output_tokens: 2,
                })
            })
        }
    }

    fn server(sampling: &str) -> hermes_config::McpServerSettings {
        toml::from_str(&format!("command = \"x\"\nsampling = {{ {sampling} }}")).unwrap()
    }

    fn sampler(sampling: &str, slow: bool) -> (Sampler, Arc<Recorder>) {
        let rec = Arc::new(Recorder {
            asked: Mutex::new(Vec::new()),
            slow,
            calls: Mutex::new(None),
        });
        let metrics = hermes_telemetry::Metrics::new().tools.clone();
        let gate = SamplingGate {
            settings: server(sampling),
            approvals: Default::default(),
            runs: Default::default(),
        };
        (Sampler::new("s".into(), gate, rec.clone(), metrics), rec)
    }

    fn count(s: &Sampler, outcome: &str) -> u64 {
        s.metrics
            .sampling_requests
            .with_label_values(&["s", outcome])
            .get()
    }

    fn ask(hints: &[&str], max_tokens: u32) -> SamplingRequest {
        SamplingRequest {
            messages: vec![ChatMessage::text(hermes_types::model::Role::User, "hi")],
            max_tokens,
            hints: hints.iter().map(|h| h.to_string()).collect(),
            ..SamplingRequest::default()
        }
    }

    fn with_tools(names: &[&str]) -> SamplingRequest {
        let mut request = ask(&[], 10);
        request.tools = names
            .iter()
            .map(|n| ToolSpec {
                name: n.to_string(),
                description: String::new(),
                parameters: serde_json::json!({"type": "object"}),
                toolset: String::new(),
            })
            .collect();
        request
    }

    #[tokio::test]
    async fn caps_tokens_and_picks_allowed_models() {
        let (s, rec) = sampler("max_tokens_cap = 100, allowed_models = [\"big\"]", false);
        s.sample(ask(&["small", "big"], 5000)).await.unwrap();
        s.sample(ask(&["gpt-unknown"], 50)).await.unwrap();
        let asked: Vec<(String, u32)> = rec
            .asked
            .lock()
            .unwrap()
            .iter()
            .map(|(m, t, _)| (m.clone(), *t))
            .collect();
        assert_eq!(asked, [("big".to_owned(), 100), ("big".to_owned(), 50)]);
        let (s, rec) = sampler("model = \"small\"", false);
        s.sample(ask(&["big"], 10)).await.unwrap();
        assert_eq!(rec.asked.lock().unwrap()[0].0, "small", "the override wins");
    }

    #[tokio::test]
    async fn refuses_when_disabled_over_the_rate_with_tools_off_or_too_slow() {
        let (s, _) = sampler("enabled = false", false);
        assert_eq!(
            s.sample(ask(&[], 10)).await.unwrap_err(),
            SamplingError::Disabled
        );

        let (s, rec) = sampler("max_rpm = 3, max_tool_rounds = 0", false);
        assert!(!s.offers_tools());
        s.sample(ask(&[], 10)).await.unwrap();
        s.sample(ask(&[], 10)).await.unwrap();
        assert_eq!(
            s.sample(with_tools(&["t"])).await.unwrap_err(),
            SamplingError::ToolsRefused
        );
        s.sample(ask(&[], 10)).await.unwrap();
        assert_eq!(
            s.sample(ask(&[], 10)).await.unwrap_err(),
            SamplingError::RateLimited(3)
        );
        assert_eq!(rec.asked.lock().unwrap().len(), 3);
        // Counted by outcome, and only answered calls' reported tokens, not the cap asked for.
        let counts = ["answered", "rate_limited", "tools_refused"].map(|o| count(&s, o));
        assert_eq!(counts, [3, 1, 1]);
        let tokens = |d: &str| s.metrics.sampling_tokens.with_label_values(&["s", d]).get();
        assert_eq!((tokens("input"), tokens("output")), (21, 6));

        let (s, _) = sampler("timeout = 0.2", true);
        assert!(matches!(
            s.sample(ask(&[], 10)).await.unwrap_err(),
            SamplingError::Timeout(_)
        ));
    }

    #[tokio::test]
    async fn tool_rounds_in_a_row_past_the_limit_are_refused() {
        let (s, rec) = sampler("max_tool_rounds = 2, max_rpm = 100", false);
        assert!(s.offers_tools());
        *rec.calls.lock().unwrap() = Some("t".into());
        // Two rounds, a text answer ends the loop, two more, then the third in a row fails.
        for _ in 0..2 {
            let answer = s.sample(with_tools(&["t"])).await.unwrap();
            assert_eq!(answer.tool_calls[0].name, "t");
        }
        *rec.calls.lock().unwrap() = None;
        s.sample(with_tools(&["t"])).await.unwrap();
        *rec.calls.lock().unwrap() = Some("t".into());
        for _ in 0..2 {
            s.sample(with_tools(&["t"])).await.unwrap();
        }
        assert_eq!(
            s.sample(with_tools(&["t"])).await.unwrap_err(),
            SamplingError::ToolRoundsExceeded(2)
        );
        assert_eq!(count(&s, "tool_rounds_exceeded"), 1);
        // The refused call's tokens were used all the same.
        let tokens = |d: &str| s.metrics.sampling_tokens.with_label_values(&["s", d]).get();
        assert_eq!(tokens("input"), 6 * 7);
        // A new loop starts from zero.
        s.sample(with_tools(&["t"])).await.unwrap();

        // A call of a tool the model was not shown never reaches the server; toolChoice
        // none shows no tool at all.
        *rec.calls.lock().unwrap() = Some("other".into());
        assert_eq!(
            s.sample(with_tools(&["t"])).await.unwrap_err(),
            SamplingError::ToolNotOffered("other".into())
        );
        *rec.calls.lock().unwrap() = None;
        let mut none = with_tools(&["t"]);
        none.tool_choice = ToolChoice::None;
        s.sample(none).await.unwrap();
        assert!(rec.asked.lock().unwrap().last().unwrap().2.is_empty());
    }
}
