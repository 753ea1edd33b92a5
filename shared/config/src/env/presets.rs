//! The OpenAI-compatible presets (docs/models-and-budgets.md, backends): each provider's key
//! and the base URL it is reached at, overridable. What differs in their wire format is the
//! gateway's (`providers::openai::presets`); everything else is the OpenAI-compatible path.

use secrecy::SecretString;
use url::Url;

use super::Unset::{Means, Value};
use super::{kinds, settings};

settings! {
    /// OpenAI-compatible presets, chosen by name only.
    SETTINGS = [
        DEEPSEEK_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of DeepSeek (preset `deepseek`; chosen by name, not by key priority)",
        },
        DEEPSEEK_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://api.deepseek.com/v1"),
            secret: false,
            help: "base URL of DeepSeek (`/chat/completions` is appended)",
        },
        GROQ_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of Groq (preset `groq`; chosen by name, not by key priority)",
        },
        GROQ_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://api.groq.com/openai/v1"),
            secret: false,
            help: "base URL of Groq (`/chat/completions` is appended)",
        },
        TOGETHER_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of Together AI (preset `together`; chosen by name, not by key priority)",
        },
        TOGETHER_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://api.together.xyz/v1"),
            secret: false,
            help: "base URL of Together AI (`/chat/completions` is appended)",
        },
        MISTRAL_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of Mistral AI (preset `mistral`; chosen by name, not by key priority)",
        },
        MISTRAL_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://api.mistral.ai/v1"),
            secret: false,
            help: "base URL of Mistral AI (`/chat/completions` is appended)",
        },
        FIREWORKS_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of Fireworks AI (preset `fireworks`; chosen by name, not by key priority)",
        },
        FIREWORKS_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://api.fireworks.ai/inference/v1"),
            secret: false,
            help: "base URL of Fireworks AI (`/chat/completions` is appended)",
        },
        XAI_API_KEY: SecretString {
            kind: kinds::SECRET,
            unset: Means("(none)"),
            secret: true,
            help: "key of xAI (preset `xai`; chosen by name, not by key priority)",
        },
        XAI_BASE_URL: Url {
            kind: kinds::HTTP_URL,
            unset: Value("https://api.x.ai/v1"),
            secret: false,
            help: "base URL of xAI (`/chat/completions` is appended)",
        },
    ]
}
