//! Model backends behind one interface ([`Adapter`]): the built-in mock, native Anthropic
//! Messages, native Gemini, and OpenAI-compatible chat completions (OpenAI, OpenRouter, the
//! Hermes gateway, Ollama, and the presets: DeepSeek, Groq, Together, Mistral, Fireworks,
//! xAI). Each adapter translates our neutral call into its wire format
//! and its answer, stream and usage back; nothing outside this module sees a wire format.

mod anthropic;
mod gemini;
mod http;
mod mock;
mod openai;
mod sse;

use std::future::Future;
use std::time::Duration;

use hermes_config::{BackendKind, ProviderSettings, Resolved};
use hermes_types::model::{CallParams, ChatMessage, FinishReason, ToolCall, ToolSpec, Usage};

pub use anthropic::Anthropic;
pub use gemini::Gemini;
pub use http::{HttpClient, RejectReason};
pub use mock::Mock;
pub use openai::OpenAi;
pub use openai::presets;

/// One model call in provider-neutral form.
pub struct CallSpec<'a> {
    /// The provider's own model id.
    pub model_id: &'a str,
    /// Output cap: the model's, lowered by the caller's `max_tokens`.
    pub max_tokens: u32,
    /// The conversation; every `Role::System` message is one system block, in order.
    pub messages: &'a [ChatMessage],
    /// Tools offered (empty: none; adapters must then send no tool fields at all).
    pub tools: &'a [ToolSpec],
    pub params: &'a CallParams,
    /// Longest the whole attempt may take.
    pub timeout: Duration,
    /// Streams: longest wait for the first event.
    pub first_token_timeout: Duration,
    /// Streams: longest silence between two events.
    pub idle_timeout: Duration,
}

/// A model's answer.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Completion {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    /// Input and output tokens as the provider reported them (thinking billed as output);
    /// the cost is filled in by the chain, which knows the model's prices.
    pub usage: Usage,
    pub finish_reason: FinishReason,
}

/// Receives the text of a streamed answer as it arrives.
pub trait DeltaSink: Send + Sync {
    fn delta(&self, text: &str);
}

/// Why a call failed. The chain decides from [`ProviderError::fails_over`] whether the next
/// backend is tried.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    #[error("rate limited (429){}", .retry_after.map(|d| format!(", retry after {}s", d.as_secs())).unwrap_or_default())]
    RateLimited { retry_after: Option<Duration> },
    #[error("server error {status}: {message}")]
    Server { status: u16, message: String },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("request refused ({status}, {reason}): {message}")]
    Rejected {
        status: u16,
        reason: RejectReason,
        message: String,
    },
    #[error("malformed response: {0}")]
    Malformed(String),
    /// A stream that ended or broke before its end marker.
    #[error("stream interrupted: {0}")]
    Interrupted(String),
}

impl ProviderError {
    /// Worth trying the next backend: 429, 5xx, timeouts, connection errors, broken or
    /// malformed answers, a key the backend refuses, and a context another model may fit.
    /// A content-policy refusal or an invalid request would fail the same way anywhere.
    pub fn fails_over(&self) -> bool {
        match self {
            ProviderError::Rejected { reason, .. } => matches!(
                reason,
                RejectReason::ContextLength | RejectReason::Unauthorized
            ),
            _ => true,
        }
    }

    /// The metric label of this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            ProviderError::RateLimited { .. } => "rate_limited",
            ProviderError::Server { .. } => "server_error",
            ProviderError::Timeout(_) => "timeout",
            ProviderError::Connect(_) => "connect",
            ProviderError::Rejected { reason, .. } => reason.as_str(),
            ProviderError::Malformed(_) => "malformed",
            ProviderError::Interrupted(_) => "interrupted",
        }
    }
}

/// What every backend can do.
pub trait Adapter: Send + Sync {
    fn kind(&self) -> BackendKind;
    /// Whether the backend takes native tool definitions (the chain skips it otherwise
    /// when the request carries tools).
    fn supports_tools(&self) -> bool;
    /// One call, the whole answer at once.
    fn complete(
        &self,
        call: &CallSpec<'_>,
    ) -> impl Future<Output = Result<Completion, ProviderError>> + Send;
    /// One streamed call: text deltas go to `sink` as they arrive; the result is the
    /// assembled answer with usage. Fails if the stream ends without its end marker.
    fn stream(
        &self,
        call: &CallSpec<'_>,
        sink: &dyn DeltaSink,
    ) -> impl Future<Output = Result<Completion, ProviderError>> + Send;
    /// A cheap authenticated request proving the backend answers (its model list).
    fn health_check(&self) -> impl Future<Output = Result<(), ProviderError>> + Send;
}

/// A built backend.
pub enum Backend {
    Mock(Mock),
    OpenAi(OpenAi),
    Anthropic(Anthropic),
    Gemini(Gemini),
}

impl Backend {
    /// The adapter for a resolved provider, sharing the process's HTTP client.
    pub fn build(http: &HttpClient, resolved: Resolved, settings: &ProviderSettings) -> Self {
        match resolved.kind {
            BackendKind::Mock => Backend::Mock(Mock),
            BackendKind::Anthropic => Backend::Anthropic(Anthropic::new(
                http.clone(),
                resolved,
                settings.anthropic_version.clone(),
            )),
            BackendKind::Gemini => Backend::Gemini(Gemini::new(http.clone(), resolved)),
            BackendKind::Hermes
            | BackendKind::Openrouter
            | BackendKind::Openai
            | BackendKind::Ollama
            | BackendKind::Deepseek
            | BackendKind::Groq
            | BackendKind::Together
            | BackendKind::Mistral
            | BackendKind::Fireworks
            | BackendKind::Xai => Backend::OpenAi(OpenAi::new(http.clone(), resolved)),
        }
    }
}

impl Adapter for Backend {
    fn kind(&self) -> BackendKind {
        match self {
            Backend::Mock(b) => b.kind(),
            Backend::OpenAi(b) => b.kind(),
            Backend::Anthropic(b) => b.kind(),
            Backend::Gemini(b) => b.kind(),
        }
    }

    fn supports_tools(&self) -> bool {
        match self {
            Backend::Mock(b) => b.supports_tools(),
            Backend::OpenAi(b) => b.supports_tools(),
            Backend::Anthropic(b) => b.supports_tools(),
            Backend::Gemini(b) => b.supports_tools(),
        }
    }

    async fn complete(&self, call: &CallSpec<'_>) -> Result<Completion, ProviderError> {
        match self {
            Backend::Mock(b) => b.complete(call).await,
            Backend::OpenAi(b) => b.complete(call).await,
            Backend::Anthropic(b) => b.complete(call).await,
            Backend::Gemini(b) => b.complete(call).await,
        }
    }

    async fn stream(
        &self,
        call: &CallSpec<'_>,
        sink: &dyn DeltaSink,
    ) -> Result<Completion, ProviderError> {
        match self {
            Backend::Mock(b) => b.stream(call, sink).await,
            Backend::OpenAi(b) => b.stream(call, sink).await,
            Backend::Anthropic(b) => b.stream(call, sink).await,
            Backend::Gemini(b) => b.stream(call, sink).await,
        }
    }

    async fn health_check(&self) -> Result<(), ProviderError> {
        match self {
            Backend::Mock(b) => b.health_check().await,
            Backend::OpenAi(b) => b.health_check().await,
            Backend::Anthropic(b) => b.health_check().await,
            Backend::Gemini(b) => b.health_check().await,
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Helpers for adapter tests.
    use super::*;
    use std::sync::Mutex;

    /// A sink that records every delta.
    #[derive(Default)]
    pub struct Collect(pub Mutex<Vec<String>>);

    impl DeltaSink for Collect {
        fn delta(&self, text: &str) {
            self.0.lock().unwrap().push(text.to_string());
        }
    }

    impl Collect {
        pub fn joined(&self) -> String {
            self.0.lock().unwrap().concat()
        }
    }

    /// A call with generous timeouts.
    pub fn call<'a>(
        model_id: &'a str,
        messages: &'a [ChatMessage],
        tools: &'a [ToolSpec],
        params: &'a CallParams,
    ) -> CallSpec<'a> {
        CallSpec {
            model_id,
            max_tokens: 256,
            messages,
            tools,
            params,
            timeout: Duration::from_secs(5),
            first_token_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(2),
        }
    }

    /// A resolved backend at a fake server.
    pub fn resolved(kind: BackendKind, base: &str) -> Resolved {
        Resolved {
            kind,
            key: Some(secrecy::SecretString::from("test-key".to_string())),
            base_url: url::Url::parse(base).unwrap(),
        }
    }
}
