//! Model backends: a wire format and where it lives. Chosen by configuration, named in
//! run overrides and metrics.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A model backend: a wire format and where it lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Built-in demo provider: answers `echo: <last user message>`, free.
    Mock,
    /// The Hermes inference gateway (OpenAI-compatible).
    Hermes,
    /// OpenRouter (OpenAI-compatible).
    Openrouter,
    /// Anthropic's native Messages API.
    Anthropic,
    /// Google's native Gemini `generateContent` API.
    Gemini,
    /// OpenAI or any OpenAI-compatible endpoint.
    Openai,
    /// A local Ollama server (OpenAI-compatible, no tools, no key).
    Ollama,
    /// DeepSeek (an OpenAI-compatible preset).
    Deepseek,
    /// Groq (an OpenAI-compatible preset).
    Groq,
    /// Together AI (an OpenAI-compatible preset).
    Together,
    /// Mistral AI (an OpenAI-compatible preset).
    Mistral,
    /// Fireworks AI (an OpenAI-compatible preset).
    Fireworks,
    /// xAI (an OpenAI-compatible preset).
    Xai,
}

impl BackendKind {
    pub const ALL: [BackendKind; 13] = [
        BackendKind::Mock,
        BackendKind::Hermes,
        BackendKind::Openrouter,
        BackendKind::Anthropic,
        BackendKind::Gemini,
        BackendKind::Openai,
        BackendKind::Ollama,
        BackendKind::Deepseek,
        BackendKind::Groq,
        BackendKind::Together,
        BackendKind::Mistral,
        BackendKind::Fireworks,
        BackendKind::Xai,
    ];

    /// The OpenAI-compatible presets: chosen by name only (`HERMES_PROVIDER`, a model's
    /// `backend`, `provider:model`), never by key priority, so several can be configured at
    /// once beside the default provider (docs/models-and-budgets.md, backends).
    pub const PRESETS: &'static [BackendKind] = BackendKind::ALL.split_at(7).1;

    /// The keyed backends in the priority of docs/models-and-budgets.md: the first whose key is present wins.
    pub const KEY_PRIORITY: [BackendKind; 5] = [
        BackendKind::Hermes,
        BackendKind::Openrouter,
        BackendKind::Anthropic,
        BackendKind::Gemini,
        BackendKind::Openai,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Mock => "mock",
            BackendKind::Hermes => "hermes",
            BackendKind::Openrouter => "openrouter",
            BackendKind::Anthropic => "anthropic",
            BackendKind::Gemini => "gemini",
            BackendKind::Openai => "openai",
            BackendKind::Ollama => "ollama",
            BackendKind::Deepseek => "deepseek",
            BackendKind::Groq => "groq",
            BackendKind::Together => "together",
            BackendKind::Mistral => "mistral",
            BackendKind::Fireworks => "fireworks",
            BackendKind::Xai => "xai",
        }
    }

    /// The environment variable holding this backend's key (`None`: it needs none).
    pub fn key_var(self) -> Option<&'static str> {
        match self {
            BackendKind::Hermes => Some("HERMES_API_KEY"),
            BackendKind::Openrouter => Some("OPENROUTER_API_KEY"),
            BackendKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            BackendKind::Gemini => Some("GEMINI_API_KEY"),
            BackendKind::Openai => Some("OPENAI_API_KEY"),
            BackendKind::Deepseek => Some("DEEPSEEK_API_KEY"),
            BackendKind::Groq => Some("GROQ_API_KEY"),
            BackendKind::Together => Some("TOGETHER_API_KEY"),
            BackendKind::Mistral => Some("MISTRAL_API_KEY"),
            BackendKind::Fireworks => Some("FIREWORKS_API_KEY"),
            BackendKind::Xai => Some("XAI_API_KEY"),
            BackendKind::Mock | BackendKind::Ollama => None,
        }
    }

    /// The environment variable overriding this backend's base URL.
    pub fn base_url_var(self) -> Option<&'static str> {
        match self {
            BackendKind::Hermes => Some("HERMES_BASE_URL"),
            BackendKind::Openrouter => Some("OPENROUTER_BASE_URL"),
            BackendKind::Anthropic => Some("ANTHROPIC_BASE_URL"),
            BackendKind::Gemini => Some("GEMINI_BASE_URL"),
            BackendKind::Openai => Some("OPENAI_BASE_URL"),
            BackendKind::Ollama => Some("OLLAMA_BASE_URL"),
            BackendKind::Deepseek => Some("DEEPSEEK_BASE_URL"),
            BackendKind::Groq => Some("GROQ_BASE_URL"),
            BackendKind::Together => Some("TOGETHER_BASE_URL"),
            BackendKind::Mistral => Some("MISTRAL_BASE_URL"),
            BackendKind::Fireworks => Some("FIREWORKS_BASE_URL"),
            BackendKind::Xai => Some("XAI_BASE_URL"),
            BackendKind::Mock => None,
        }
    }

    /// The model used when an agent is moved to this backend without naming one.
    pub fn default_model(self) -> &'static str {
        match self {
            BackendKind::Mock => "mock",
            BackendKind::Hermes => "Hermes-4-70B",
            BackendKind::Openrouter => "anthropic/claude-haiku-4.5",
            BackendKind::Anthropic => "claude-haiku-4-5-20251001",
            BackendKind::Gemini => "gemini-2.5-flash",
            BackendKind::Openai => "gpt-4o-mini",
            BackendKind::Ollama => "llama3.1",
            BackendKind::Deepseek => "deepseek-chat",
            BackendKind::Groq => "llama-3.3-70b-versatile",
            BackendKind::Together => "meta-llama/Llama-3.3-70B-Instruct-Turbo",
            BackendKind::Mistral => "mistral-small-latest",
            BackendKind::Fireworks => "accounts/fireworks/models/llama-v3p3-70b-instruct",
            BackendKind::Xai => "grok-3-mini",
        }
    }

    /// Whether the backend accepts tool definitions (Ollama's models are not assumed to;
    /// the mock takes them and never calls one).
    pub fn supports_tools(self) -> bool {
        !matches!(self, BackendKind::Ollama)
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().to_ascii_lowercase();
        BackendKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "{s:?} is not a backend (expected one of: {})",
                    BackendKind::ALL.map(BackendKind::as_str).join(", ")
                )
            })
    }
}
