//! The model providers: which backend answers, each backend's key and base URL, the
//! Anthropic API version, the platform's daily spend cap and the deadline of one call.

use secrecy::SecretString;
use std::time::Duration;
use url::Url;

use super::Unset::{Means, Value};
use super::presets as p;
use super::{Var, kinds, settings};
use crate::BackendKind;

settings! {
    /// Providers, keys and spend.
    SETTINGS = [
        HERMES_PROVIDER: BackendKind {
            kind: kinds::BACKEND,
            unset: Means("(by key)"),
            secret: false,
            help: "force a model backend: `mock`, `hermes`, `openrouter`, `anthropic`, `gemini`, `openai`, `ollama`, or a preset: `deepseek`, `groq`, `together`, `mistral`, `fireworks`, `xai`",
        },
        HERMES_MODEL: String {
            kind: kinds::TEXT,
            unset: Means("(from the model map)"),
            secret: false,
            help: "model id sent to the default provider for every call, overriding the model map (not for models pinned to a `backend`)",
        },
        HERMES_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of the Hermes inference gateway (OpenAI-compatible); first in key priority",
        },
        HERMES_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://inference-api.nousresearch.com/v1"),
            secret: false,
            help: "base URL of the Hermes gateway",
        },
        OPENROUTER_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of OpenRouter (OpenAI-compatible); second",
        },
        OPENROUTER_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://openrouter.ai/api/v1"),
            secret: false,
            help: "base URL of OpenRouter",
        },
        ANTHROPIC_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of Anthropic's native Messages API; third",
        },
        ANTHROPIC_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://api.anthropic.com"),
            secret: false,
            help: "base URL of Anthropic (`/v1/messages` is appended)",
        },
        ANTHROPIC_VERSION: String {
            kind: kinds::TEXT,
            unset: Value("2023-06-01"),
            secret: false,
            help: "`anthropic-version` header of every Anthropic call",
        },
        GEMINI_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of Google's native Gemini API; fourth",
        },
        GEMINI_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://generativelanguage.googleapis.com/v1beta"),
            secret: false,
            help: "base URL of Gemini (`/models/{id}:generateContent` is appended)",
        },
        OPENAI_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of OpenAI or any OpenAI-compatible endpoint; last in key priority",
        },
        OPENAI_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://api.openai.com/v1"),
            secret: false,
            help: "base URL of the OpenAI-compatible provider (`/chat/completions` is appended)",
        },
        OLLAMA_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("http://127.0.0.1:11434/v1"),
            secret: false,
            help: "base URL of a local Ollama (its OpenAI-compatible API; no key, no tools)",
        },
        LLM_GLOBAL_DAILY_BUDGET_USD: u64 {
            kind: kinds::DOLLARS,
            unset: Means("(none: no cap)"),
            secret: false,
            help: "platform-wide spend cap per UTC day in dollars (`\"250.00\"`); at or above it every model call is refused until midnight",
        },
        HERMES_LLM_TIMEOUT_SECS: Duration {
            kind: kinds::SECS,
            unset: Value("45"),
            secret: false,
            help: "deadline of one model call across all failover hops",
        },
    ]
}

/// The variables of `backend`: the one holding its key (`None`: it needs none) and the one
/// overriding its base URL (`None`: it has none). Their names are the ones
/// `BackendKind::key_var` and `base_url_var` give (a test holds them together).
pub fn backend_vars(
    backend: BackendKind,
) -> (
    Option<&'static Var<SecretString>>,
    Option<&'static Var<Url>>,
) {
    match backend {
        BackendKind::Hermes => (Some(&HERMES_API_KEY), Some(&HERMES_BASE_URL)),
        BackendKind::Openrouter => (Some(&OPENROUTER_API_KEY), Some(&OPENROUTER_BASE_URL)),
        BackendKind::Anthropic => (Some(&ANTHROPIC_API_KEY), Some(&ANTHROPIC_BASE_URL)),
        BackendKind::Gemini => (Some(&GEMINI_API_KEY), Some(&GEMINI_BASE_URL)),
        BackendKind::Openai => (Some(&OPENAI_API_KEY), Some(&OPENAI_BASE_URL)),
        BackendKind::Ollama => (None, Some(&OLLAMA_BASE_URL)),
        BackendKind::Deepseek => (Some(&p::DEEPSEEK_API_KEY), Some(&p::DEEPSEEK_BASE_URL)),
        BackendKind::Groq => (Some(&p::GROQ_API_KEY), Some(&p::GROQ_BASE_URL)),
        BackendKind::Together => (Some(&p::TOGETHER_API_KEY), Some(&p::TOGETHER_BASE_URL)),
        BackendKind::Mistral => (Some(&p::MISTRAL_API_KEY), Some(&p::MISTRAL_BASE_URL)),
        BackendKind::Fireworks => (Some(&p::FIREWORKS_API_KEY), Some(&p::FIREWORKS_BASE_URL)),
        BackendKind::Xai => (Some(&p::XAI_API_KEY), Some(&p::XAI_BASE_URL)),
        BackendKind::Mock => (None, None),
    }
}
