//! What `hermes agents set --backend … --model …` moves an agent to: a backend with a model
//! id, `provider:model` in either flag (docs/models-and-budgets.md, naming a model), or
//! `none` (back to the tier's chain). Parsed here, before anything is written.

use hermes_config::BackendKind;
use hermes_types::model::BackendOverride;
use hermes_types::model_ref::{ModelName, ModelRef};

/// The switch the flags ask for: `None` when they ask for none; `Some(None)` back to the
/// chain; `Some(Some(o))` onto `o`.
pub fn target(
    backend: Option<&str>,
    model: Option<&str>,
) -> anyhow::Result<Option<Option<BackendOverride>>> {
    let pinned = |r: ModelRef| {
        Some(Some(BackendOverride {
            backend: r.provider,
            model: r.model,
        }))
    };
    let model = model.map(str::parse::<ModelName>).transpose()?;
    match (backend.map(str::trim), model) {
        (None, None) => Ok(None),
        (Some(b), None) if b.eq_ignore_ascii_case("none") => Ok(Some(None)),
        (Some(b), Some(_)) if b.eq_ignore_ascii_case("none") => {
            anyhow::bail!("--backend none takes no --model")
        }
        (None, Some(ModelName::Pinned(r))) => Ok(pinned(r)),
        (None, Some(ModelName::Logical(m))) => {
            anyhow::bail!("--model {m} needs --backend, or write it provider:model")
        }
        (Some(b), model) => match b.parse::<ModelName>()? {
            ModelName::Pinned(r) if model.is_none() => Ok(pinned(r)),
            ModelName::Pinned(r) => {
                anyhow::bail!("--backend {r} already names its model; drop --model")
            }
            ModelName::Logical(name) => {
                let kind: BackendKind = name.parse().map_err(anyhow::Error::msg)?;
                let model = match model {
                    None => kind.default_model().to_string(),
                    Some(ModelName::Logical(m)) => m,
                    Some(ModelName::Pinned(r)) if r.provider == kind => r.model,
                    Some(ModelName::Pinned(r)) => {
                        anyhow::bail!("--model {r} is not on --backend {kind}")
                    }
                };
                Ok(pinned(ModelRef {
                    provider: kind,
                    model,
                }))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(backend: BackendKind, model: &str) -> Option<Option<BackendOverride>> {
        Some(Some(BackendOverride {
            backend,
            model: model.into(),
        }))
    }

    #[test]
    fn provider_model_is_accepted_in_either_flag() {
        let sonnet = to(BackendKind::Anthropic, "claude-sonnet-4-5");
        assert_eq!(
            target(Some("anthropic:claude-sonnet-4-5"), None).unwrap(),
            sonnet
        );
        assert_eq!(
            target(None, Some("anthropic:claude-sonnet-4-5")).unwrap(),
            sonnet
        );
        assert_eq!(
            target(Some("anthropic"), Some("anthropic:claude-sonnet-4-5")).unwrap(),
            sonnet
        );
        // Today's spelling keeps working.
        assert_eq!(
            target(Some("gemini"), Some("gemini-2.5-flash")).unwrap(),
            to(BackendKind::Gemini, "gemini-2.5-flash")
        );
        assert_eq!(
            target(Some("openai"), None).unwrap(),
            to(BackendKind::Openai, "gpt-4o-mini")
        );
        assert_eq!(target(Some("none"), None).unwrap(), Some(None));
        assert_eq!(target(None, None).unwrap(), None);
    }

    #[test]
    fn unknown_providers_and_contradictions_are_refused() {
        let e = target(None, Some("claude:sonnet")).unwrap_err().to_string();
        assert!(
            e.contains("\"claude\" is not a known provider (known providers: mock"),
            "{e}"
        );
        assert!(target(Some("gemini"), Some("anthropic:x")).is_err());
        assert!(target(Some("anthropic:x"), Some("y")).is_err());
        assert!(target(None, Some("plain")).is_err());
        assert!(target(Some("none"), Some("x")).is_err());
    }
}
