//! Model names in the configuration: a tier chain, the vision model or a `[models]` key may
//! be written `provider:model` (docs/models-and-budgets.md, naming a model). Each is parsed
//! once, at load, into the model map, so every later reader (the router's chains, the
//! gateway's hops) sees only logical names; an unknown provider is a start error naming the
//! known ones. [`resolve_model`] does the same for a name a caller sends.

use std::collections::BTreeMap;

use hermes_types::model_ref::{ModelName, ModelRef};

use crate::{FileConfig, ModelSpec, Price};

/// Output cap of a `provider:model` the map does not describe (the seed's smallest cap).
const PINNED_MAX_OUTPUT_TOKENS: u32 = 1024;

impl ModelSpec {
    /// The spec of `r` when only its name is given: the caps and prices of a `[models]` entry
    /// with the same provider id if there is one (so it stays priced), else unpriced with the
    /// smallest cap.
    fn for_ref(r: &ModelRef, models: &BTreeMap<String, ModelSpec>) -> ModelSpec {
        let like = models
            .values()
            .find(|m| m.id == r.model && m.backend == Some(r.provider))
            .or_else(|| models.values().find(|m| m.id == r.model));
        ModelSpec {
            id: r.model.clone(),
            backend: Some(r.provider),
            max_output_tokens: like.map_or(PINNED_MAX_OUTPUT_TOKENS, |m| m.max_output_tokens),
            input_price: like.map_or(Price(0), |m| m.input_price),
            output_price: like.map_or(Price(0), |m| m.output_price),
        }
    }
}

impl FileConfig {
    /// Parse every model name of the file: a `[models]` key written `provider:model` gets
    /// that backend; a chain entry or the vision model written `provider:model` and not in
    /// `[models]` gets an entry of its own under that name. Unknown providers are problems.
    pub(crate) fn expand_model_names(&mut self, problems: &mut Vec<String>) {
        for (key, spec) in &mut self.models {
            let Some(r) = parse(key, &format!("models.{key:?}"), problems) else {
                continue;
            };
            match spec.backend {
                None => spec.backend = Some(r.provider),
                Some(b) if b == r.provider => {}
                Some(b) => problems.push(format!(
                    "models.{key:?}: backend {b} disagrees with the provider {} its name gives",
                    r.provider
                )),
            }
        }
        let mut named: Vec<(String, String)> = self
            .tiers
            .iter()
            .flat_map(|(tier, chain)| {
                chain
                    .iter()
                    .map(move |n| (n.clone(), format!("tiers.{}", tier.as_str())))
            })
            .collect();
        named.push((
            self.router.vision_model.clone(),
            "router.vision_model".into(),
        ));
        for (name, place) in named {
            if self.models.contains_key(&name) {
                continue;
            }
            if let Some(r) = parse(&name, &place, problems) {
                let spec = ModelSpec::for_ref(&r, &self.models);
                self.models.insert(name, spec);
            }
        }
    }
}

/// `name` as a `provider:model` reference; `None` for a logical name, or for a refused name
/// (then recorded as a problem of `place`).
fn parse(name: &str, place: &str, problems: &mut Vec<String>) -> Option<ModelRef> {
    match name.parse::<ModelName>() {
        Ok(ModelName::Pinned(r)) => Some(r),
        Ok(ModelName::Logical(_)) => None,
        Err(e) => {
            problems.push(format!("{place}: {e}"));
            None
        }
    }
}

/// Why a caller's model name cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelChoiceError {
    /// Not a model name at all (unknown provider, empty, too long).
    #[error(transparent)]
    Invalid(#[from] hermes_types::model_ref::ModelNameError),
    /// A `provider:model` the operator did not configure: a caller may only choose among
    /// the configured models, whose prices keep the spend caps true.
    #[error("{name} is not a configured model (configured: {configured})")]
    NotConfigured { name: String, configured: String },
}

/// The logical model a caller's `name` chooses: `Some` for a `provider:model` that is a
/// configured model (a `[models]` key, or an entry with that backend and id), `None` for a
/// plain name (which only the caller sees echoed back).
pub fn resolve_model(
    models: &BTreeMap<String, ModelSpec>,
    name: &str,
) -> Result<Option<String>, ModelChoiceError> {
    let ModelName::Pinned(r) = name.parse::<ModelName>()? else {
        return Ok(None);
    };
    let key = r.to_string();
    if models.contains_key(&key) {
        return Ok(Some(key));
    }
    models
        .iter()
        .find(|(_, m)| m.id == r.model && m.backend == Some(r.provider))
        .map(|(k, _)| Some(k.clone()))
        .ok_or_else(|| ModelChoiceError::NotConfigured {
            name: key,
            configured: configured(models),
        })
}

/// The configured models as `provider:model` (the default provider's shown by logical name).
fn configured(models: &BTreeMap<String, ModelSpec>) -> String {
    models
        .iter()
        .map(|(k, m)| match m.backend {
            Some(b) if !k.contains(':') => format!("{b}:{}", m.id),
            _ => k.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BackendKind;
    use hermes_types::model::Tier;

    #[test]
    fn chain_entries_written_provider_model_become_models() {
        let mut f = FileConfig::default();
        f.tiers.insert(
            Tier::Pro,
            vec!["anthropic:claude-sonnet-4-6".into(), "claude-haiku".into()],
        );
        f.tiers
            .insert(Tier::Free, vec!["openai:gpt-4o-mini".into()]);
        let mut problems = Vec::new();
        f.expand_model_names(&mut problems);
        f.validate(&mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        let s = &f.models["anthropic:claude-sonnet-4-6"];
        assert_eq!(s.backend, Some(BackendKind::Anthropic));
        assert_eq!(s.id, "claude-sonnet-4-6");
        // Priced like the map's entry of the same provider id.
        assert_eq!(s.output_price, Price(15_000_000));
        let d = &f.models["openai:gpt-4o-mini"];
        assert_eq!(
            (d.backend, d.input_price),
            (Some(BackendKind::Openai), Price(0))
        );
    }

    #[test]
    fn unknown_provider_in_a_chain_is_a_start_error_with_the_list() {
        let mut f = FileConfig::default();
        f.tiers.insert(Tier::Pro, vec!["claude:sonnet".into()]);
        let mut problems = Vec::new();
        f.expand_model_names(&mut problems);
        let text = problems.join("\n");
        assert!(
            text.contains("tiers.pro: \"claude\" is not a known provider"),
            "{text}"
        );
        assert!(text.contains("anthropic, gemini"), "{text}");
    }

    #[test]
    fn a_models_key_written_provider_model_takes_its_backend() {
        let mut f = FileConfig::default();
        let spec = ModelSpec {
            id: "gemini-2.5-pro".into(),
            backend: None,
            max_output_tokens: 2048,
            input_price: Price(3_000_000),
            output_price: Price(15_000_000),
        };
        f.models
            .insert("gemini:gemini-2.5-pro".into(), spec.clone());
        f.models.insert(
            "openrouter:llama".into(),
            ModelSpec {
                backend: Some(BackendKind::Openai),
                ..spec
            },
        );
        let mut problems = Vec::new();
        f.expand_model_names(&mut problems);
        assert_eq!(
            f.models["gemini:gemini-2.5-pro"].backend,
            Some(BackendKind::Gemini)
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("backend openai disagrees"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_caller_chooses_only_configured_models() {
        let models = FileConfig::default().models;
        assert_eq!(resolve_model(&models, "claude-anything"), Ok(None));
        assert_eq!(
            resolve_model(&models, "ollama:llama3.1"),
            Ok(Some("ollama".into()))
        );
        let e = resolve_model(&models, "openai:gpt-5").unwrap_err();
        assert!(
            e.to_string()
                .contains("openai:gpt-5 is not a configured model (configured: claude-haiku, claude-sonnet, ollama:llama3.1)"),
            "{e}"
        );
        assert!(matches!(
            resolve_model(&models, "foo:bar"),
            Err(ModelChoiceError::Invalid(_))
        ));
    }
}
