//! Model providers behind one interface: the built-in mock and any OpenAI-compatible
//! endpoint. Each provider translates our neutral request into its wire format and its
//! answer (and usage) back.

mod mock;
mod openai;

use std::time::Duration;

use hermes_shared::config::{Config, ProviderKind};
use hermes_shared::model::{ChatMessage, ToolCall, ToolSpec, Usage};

pub use mock::Mock;
pub use openai::OpenAi;

/// One model call in provider-neutral form.
pub struct CallSpec<'a> {
    pub model_id: &'a str,
    pub max_tokens: u32,
    pub messages: &'a [ChatMessage],
    pub tools: &'a [ToolSpec],
    pub timeout: Duration,
}

/// A model's answer.
#[derive(Clone, Debug)]
pub struct Completion {
    pub text: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub finish_reason: String,
}

/// Why a call failed; `retryable` errors hand the call to the next backend of the chain.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("rate limited (429){}", .retry_after.map(|d| format!(", retry after {}s", d.as_secs())).unwrap_or_default())]
    RateLimited { retry_after: Option<Duration> },
    #[error("server error {status}: {message}")]
    Server { status: u16, message: String },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("request refused ({status}): {message}")]
    Rejected { status: u16, message: String },
    #[error("malformed response: {0}")]
    Malformed(String),
}

impl ProviderError {
    /// Worth trying the next backend (429, 5xx, timeouts, connection errors).
    pub fn retryable(&self) -> bool {
        !matches!(self, ProviderError::Rejected { .. })
    }

    /// The metric label of this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            ProviderError::RateLimited { .. } => "rate_limited",
            ProviderError::Server { .. } => "server_error",
            ProviderError::Timeout(_) => "timeout",
            ProviderError::Connect(_) => "connect",
            ProviderError::Rejected { .. } => "rejected",
            ProviderError::Malformed(_) => "malformed",
        }
    }
}

/// The configured provider.
pub enum Provider {
    Mock(Mock),
    OpenAi(OpenAi),
}

impl Provider {
    /// Build the provider the configuration resolves to (fails with one clear line).
    pub fn from_config(config: &Config) -> anyhow::Result<Self> {
        let kind = config.provider.resolve().map_err(anyhow::Error::msg)?;
        Ok(match kind {
            ProviderKind::Mock => Provider::Mock(Mock),
            ProviderKind::OpenAi => Provider::OpenAi(OpenAi::new(&config.provider)?),
        })
    }

    pub fn name(&self) -> &'static str {
        match self {
            Provider::Mock(_) => "mock",
            Provider::OpenAi(_) => "openai",
        }
    }

    pub async fn complete(&self, call: &CallSpec<'_>) -> Result<Completion, ProviderError> {
        match self {
            Provider::Mock(m) => Ok(m.complete(call)),
            Provider::OpenAi(o) => o.complete(call).await,
        }
    }
}
