//! A caller's `model` (chat completions, responses, a job): a plain name is only echoed
//! back, a `provider:model` chooses that configured model for the run, tried before the
//! tier's chain (docs/api.md, choosing a model). Parsed here, at the edge, once.

use std::collections::BTreeMap;

use hermes_config::{ModelChoiceError, ModelSpec, resolve_model};
use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::model_ref::ModelNameError;

/// The logical model `name` chooses (`None`: a plain name, nothing chosen); `400
/// unknown_provider` or `400 model_not_found` with the list a caller can pick from.
pub fn choose(
    models: &BTreeMap<String, ModelSpec>,
    name: &str,
) -> Result<Option<String>, ApiError> {
    resolve_model(models, name).map_err(|e| {
        let code = match &e {
            ModelChoiceError::Invalid(ModelNameError::UnknownProvider { .. }) => {
                ApiErrorCode::UnknownProvider
            }
            ModelChoiceError::Invalid(_) => ApiErrorCode::InvalidRequest,
            ModelChoiceError::NotConfigured { .. } => ApiErrorCode::ModelNotFound,
        };
        ApiError::bad_request(code, format!("model: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_carry_their_codes() {
        let models = hermes_config::FileConfig::default().models;
        assert_eq!(choose(&models, "gpt-4o").unwrap(), None);
        assert_eq!(
            choose(&models, "ollama:llama3.1").unwrap().as_deref(),
            Some("ollama")
        );
        let e = choose(&models, "acme:m").unwrap_err();
        assert_eq!(e.code, ApiErrorCode::UnknownProvider);
        assert!(
            e.message.contains("known providers: mock, hermes"),
            "{}",
            e.message
        );
        let e = choose(&models, "openai:gpt-5").unwrap_err();
        assert_eq!(e.code, ApiErrorCode::ModelNotFound);
    }
}
