//! How a model is named wherever an operator or a caller names one (the tier chains of the
//! configuration, the CLI, the API's `model` field, a job's model): either a logical name of
//! the `[models]` map (`claude-haiku`) or `provider:model` (`anthropic:claude-sonnet-4-5`),
//! a provider's own model id on a named backend (docs/models-and-budgets.md, naming a model).
//! The text is parsed once, where it enters, into a [`ModelName`]; an unknown provider is
//! refused there with the list of known ones.

use std::fmt;
use std::str::FromStr;

use crate::backend::BackendKind;

/// Longest model name accepted (a provider's ids are far shorter; the bound keeps a caller's
/// text out of logs and labels).
pub const MAX_MODEL_NAME_LEN: usize = 200;

/// A provider's model on a named backend: `provider:model`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelRef {
    /// The backend that serves it.
    pub provider: BackendKind,
    /// The provider's own model id (may itself hold `:` or `/`, e.g. `llama3.1:8b`).
    pub model: String,
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.provider, self.model)
    }
}

/// A model as named: a logical name of the model map, or a `provider:model` reference.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ModelName {
    /// A key of `[models]` (or, on the API, any other name, which is only echoed).
    Logical(String),
    /// `provider:model`.
    Pinned(ModelRef),
}

impl ModelName {
    /// The pinned reference, if this is one.
    pub fn pinned(&self) -> Option<&ModelRef> {
        match self {
            ModelName::Pinned(r) => Some(r),
            ModelName::Logical(_) => None,
        }
    }
}

impl fmt::Display for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelName::Logical(n) => f.write_str(n),
            ModelName::Pinned(r) => r.fmt(f),
        }
    }
}

/// Why a model name was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelNameError {
    #[error("the model name is empty")]
    Empty,
    #[error("the model name is longer than {MAX_MODEL_NAME_LEN} characters")]
    TooLong,
    #[error("{name:?} names no model after its provider (write provider:model)")]
    NoModel { name: String },
    #[error("{provider:?} is not a known provider (known providers: {known})")]
    UnknownProvider { provider: String, known: String },
}

/// The known providers, as a refusal lists them.
pub fn known_providers() -> String {
    BackendKind::ALL.map(BackendKind::as_str).join(", ")
}

impl FromStr for ModelName {
    type Err = ModelNameError;

    /// Text without `:` is a logical name; `provider:model` splits at its first `:`, so a
    /// provider's id keeps its own colons (`ollama:llama3.1:8b`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(ModelNameError::Empty);
        }
        if s.chars().count() > MAX_MODEL_NAME_LEN {
            return Err(ModelNameError::TooLong);
        }
        let Some((provider, model)) = s.split_once(':') else {
            return Ok(ModelName::Logical(s.to_string()));
        };
        let provider = provider.trim();
        let kind = BackendKind::ALL
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(provider))
            .ok_or_else(|| ModelNameError::UnknownProvider {
                provider: provider.to_string(),
                known: known_providers(),
            })?;
        let model = model.trim();
        if model.is_empty() {
            return Err(ModelNameError::NoModel {
                name: s.to_string(),
            });
        }
        Ok(ModelName::Pinned(ModelRef {
            provider: kind,
            model: model.to_string(),
        }))
    }
}

impl FromStr for ModelRef {
    type Err = ModelNameError;

    /// Only `provider:model` (a logical name is refused as naming no provider).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.parse::<ModelName>()? {
            ModelName::Pinned(r) => Ok(r),
            ModelName::Logical(name) => Err(ModelNameError::NoModel { name }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_model_parses_and_round_trips() {
        let n: ModelName = "anthropic:claude-sonnet-4-5".parse().unwrap();
        let r = n.pinned().unwrap();
        assert_eq!(r.provider, BackendKind::Anthropic);
        assert_eq!(r.model, "claude-sonnet-4-5");
        assert_eq!(n.to_string(), "anthropic:claude-sonnet-4-5");
        let r: ModelRef = "Ollama:llama3.1:8b".parse().unwrap();
        assert_eq!(
            (r.provider, r.model.as_str()),
            (BackendKind::Ollama, "llama3.1:8b")
        );
    }

    #[test]
    fn plain_names_stay_logical() {
        assert_eq!(
            "claude-haiku".parse::<ModelName>().unwrap(),
            ModelName::Logical("claude-haiku".into())
        );
        assert!(matches!(
            "claude-haiku".parse::<ModelRef>(),
            Err(ModelNameError::NoModel { .. })
        ));
    }

    #[test]
    fn unknown_provider_is_refused_with_the_list() {
        let e = "claude:sonnet".parse::<ModelName>().unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("\"claude\" is not a known provider"),
            "{text}"
        );
        for k in BackendKind::ALL {
            assert!(text.contains(k.as_str()), "{text}");
        }
        assert_eq!("".parse::<ModelName>(), Err(ModelNameError::Empty));
        assert!(matches!(
            "openai:".parse::<ModelName>(),
            Err(ModelNameError::NoModel { .. })
        ));
        let long = format!("openai:{}", "x".repeat(MAX_MODEL_NAME_LEN));
        assert_eq!(long.parse::<ModelName>(), Err(ModelNameError::TooLong));
    }
}
