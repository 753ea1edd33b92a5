//! The llm stage's settings, one struct whatever the source: which backends exist and how
//! the provider is chosen from the keys present (the priority of docs/models-and-budgets.md,
//! with workspace overrides), the platform's spend cap and the deadline of one call (from
//! the environment), and the `[llm]` table: backpressure, per-attempt timeouts, the
//! response cache and token budgets.

use std::collections::BTreeMap;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

pub use hermes_types::backend::BackendKind;
use hermes_types::model::Tier;

use crate::env::providers as env;

/// Workspace-level provider secrets: a value overrides the global key of the same name,
/// an empty value clears it for that workspace (docs/models-and-budgets.md, workspace keys).
pub type WorkspaceSecrets = BTreeMap<String, String>;

/// The provider a call resolves to, with what it needs to authenticate.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub kind: BackendKind,
    pub key: Option<SecretString>,
    pub base_url: Url,
}

/// Model provider settings from the environment.
#[derive(Clone, Debug)]
pub struct ProviderSettings {
    /// `HERMES_PROVIDER`: use this backend whatever keys are present.
    pub forced: Option<BackendKind>,
    /// `HERMES_MODEL`: the model id of every call of the default provider.
    pub model_override: Option<String>,
    /// Global keys by backend.
    pub keys: BTreeMap<BackendKind, SecretString>,
    /// Base URL of every backend that has one (defaults filled in).
    pub base_urls: BTreeMap<BackendKind, Url>,
    /// `ANTHROPIC_VERSION` header value.
    pub anthropic_version: String,
}

impl Default for ProviderSettings {
    /// What an empty environment reads as: no forced backend, no key, every base URL and
    /// the Anthropic version their declared defaults.
    fn default() -> Self {
        let base_urls = BackendKind::ALL
            .into_iter()
            .filter_map(|kind| {
                let (_, base_url) = env::backend_vars(kind);
                base_url.map(|var| (kind, var.unset_value()))
            })
            .collect();
        Self {
            forced: None,
            model_override: None,
            keys: BTreeMap::new(),
            base_urls,
            anthropic_version: env::ANTHROPIC_VERSION.unset_value(),
        }
    }
}

impl ProviderSettings {
    /// The key of `kind` for a workspace: its own value, else the global one; an empty
    /// workspace value clears the global key.
    pub fn key_for(
        &self,
        kind: BackendKind,
        workspace: Option<&WorkspaceSecrets>,
    ) -> Option<SecretString> {
        let var = kind.key_var()?;
        match workspace.and_then(|w| w.get(var)) {
            Some(v) if v.trim().is_empty() => None,
            Some(v) => Some(SecretString::from(v.trim().to_string())),
            None => self.keys.get(&kind).cloned(),
        }
    }

    /// The base URL of `kind` (mock has none; a placeholder keeps the type simple).
    pub fn base_url(&self, kind: BackendKind) -> Url {
        self.base_urls
            .get(&kind)
            .cloned()
            .unwrap_or_else(|| Url::parse("http://mock.invalid/").expect("static URL"))
    }

    /// A backend pinned by name (a model's `backend`, an agent's override), with its key.
    pub fn pinned(
        &self,
        kind: BackendKind,
        workspace: Option<&WorkspaceSecrets>,
    ) -> Result<Resolved, String> {
        let key = self.key_for(kind, workspace);
        if let (Some(var), None) = (kind.key_var(), &key) {
            return Err(format!("backend {kind} needs {var}, which is not set"));
        }
        Ok(Resolved {
            kind,
            key,
            base_url: self.base_url(kind),
        })
    }

    /// The default provider: the forced one, else the first backend in key priority whose
    /// key is present (workspace values first).
    pub fn resolve(&self, workspace: Option<&WorkspaceSecrets>) -> Result<Resolved, String> {
        if let Some(forced) = self.forced {
            return self
                .pinned(forced, workspace)
                .map_err(|e| format!("HERMES_PROVIDER={forced}: {e}"));
        }
        BackendKind::KEY_PRIORITY
            .into_iter()
            .find_map(|kind| {
                self.key_for(kind, workspace).map(|key| Resolved {
                    kind,
                    key: Some(key),
                    base_url: self.base_url(kind),
                })
            })
            .ok_or_else(|| {
                format!(
                    "no model provider: set one of {}, or HERMES_PROVIDER=mock for the demo provider",
                    BackendKind::KEY_PRIORITY
                        .map(|k| k.key_var().unwrap_or_default())
                        .join(", ")
                )
            })
    }
}

/// Token budgets of one tier.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TierBudget {
    pub daily_tokens: u64,
    pub monthly_tokens: u64,
}

/// `[llm.cache]`: the response cache of tool-free calls.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheSettings {
    pub enabled: bool,
    pub ttl_secs: u64,
}

impl Default for CacheSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            ttl_secs: 3600,
        }
    }
}

/// Everything the llm stage (and every model call, through the gateway) reads
/// (`ctx.config.llm`). The fields without `#[serde(skip)]` are `[llm]` in the TOML file,
/// each with the seed's value as its default; the skipped ones come from the environment
/// (`crate::env::providers`) and are set by `Config::from_lookup`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmSettings {
    /// Model calls one process makes at once.
    pub max_concurrent: usize,
    /// How long a call waits for a free slot before the user gets a capacity reply.
    pub max_wait_ms: u64,
    /// Longest single attempt on one backend (the whole call has HERMES_LLM_TIMEOUT_SECS).
    pub attempt_timeout_secs: u64,
    /// A streamed answer whose first event takes longer fails over to the next backend.
    pub first_token_timeout_secs: u64,
    /// Longest silence between two events of a streamed answer.
    pub stream_idle_timeout_secs: u64,
    /// Longest `Retry-After` waited for before moving to the next backend.
    pub max_retry_after_secs: u64,
    pub cache: CacheSettings,
    /// Per-user token budgets by tier.
    pub budgets: BTreeMap<Tier, TierBudget>,
    /// The backends, their keys and base URLs (`HERMES_PROVIDER`, `*_API_KEY`, …).
    #[serde(skip)]
    pub provider: ProviderSettings,
    /// `LLM_GLOBAL_DAILY_BUDGET_USD` in micro-dollars (`None`: no cap).
    #[serde(skip)]
    pub global_daily_budget_micro_usd: Option<u64>,
    /// `HERMES_LLM_TIMEOUT_SECS`: the deadline of one whole model call, failovers included.
    #[serde(skip)]
    pub call_timeout: Duration,
}

impl Default for LlmSettings {
    fn default() -> Self {
        let b = |daily: u64| TierBudget {
            daily_tokens: daily,
            monthly_tokens: daily * 30,
        };
        Self {
            max_concurrent: 30,
            max_wait_ms: 15_000,
            attempt_timeout_secs: 30,
            first_token_timeout_secs: 15,
            stream_idle_timeout_secs: 20,
            max_retry_after_secs: 5,
            cache: CacheSettings::default(),
            budgets: BTreeMap::from([
                (Tier::Free, b(50_000)),
                (Tier::Starter, b(200_000)),
                (Tier::Pro, b(1_000_000)),
                (Tier::VenueGrowth, b(1_000_000)),
            ]),
            provider: ProviderSettings::default(),
            global_daily_budget_micro_usd: None,
            call_timeout: env::HERMES_LLM_TIMEOUT_SECS.unset_value(),
        }
    }
}

impl LlmSettings {
    pub fn max_wait(&self) -> Duration {
        Duration::from_millis(self.max_wait_ms)
    }
    pub fn attempt_timeout(&self) -> Duration {
        Duration::from_secs(self.attempt_timeout_secs)
    }
    pub fn first_token_timeout(&self) -> Duration {
        Duration::from_secs(self.first_token_timeout_secs)
    }
    pub fn stream_idle_timeout(&self) -> Duration {
        Duration::from_secs(self.stream_idle_timeout_secs)
    }
    pub fn max_retry_after(&self) -> Duration {
        Duration::from_secs(self.max_retry_after_secs)
    }

    /// The budget of `tier` (a tier left out of the file has none: unlimited).
    pub fn budget(&self, tier: Tier) -> Option<TierBudget> {
        self.budgets.get(&tier).copied()
    }

    pub(super) fn validate(&self, problems: &mut Vec<String>) {
        if self.max_concurrent == 0 {
            problems.push("llm.max_concurrent must be above 0".into());
        }
        for (name, v) in [
            ("attempt_timeout_secs", self.attempt_timeout_secs),
            ("first_token_timeout_secs", self.first_token_timeout_secs),
            ("stream_idle_timeout_secs", self.stream_idle_timeout_secs),
        ] {
            if v == 0 {
                problems.push(format!("llm.{name} must be above 0"));
            }
        }
        for (tier, b) in &self.budgets {
            if b.daily_tokens == 0 || b.monthly_tokens < b.daily_tokens {
                problems.push(format!(
                    "llm.budgets.{}: daily_tokens must be above 0 and monthly_tokens at least daily_tokens",
                    tier.as_str()
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn settings(keys: &[(BackendKind, &str)]) -> ProviderSettings {
        ProviderSettings {
            forced: None,
            model_override: None,
            keys: keys
                .iter()
                .map(|(k, v)| (*k, SecretString::from(v.to_string())))
                .collect(),
            base_urls: BackendKind::ALL
                .into_iter()
                .filter(|k| *k != BackendKind::Mock)
                .map(|k| (k, Url::parse(&format!("https://{k}.example/")).unwrap()))
                .collect(),
            anthropic_version: "2023-06-01".into(),
        }
    }

    #[test]
    fn first_key_in_priority_wins() {
        let s = settings(&[
            (BackendKind::Openai, "o"),
            (BackendKind::Gemini, "g"),
            (BackendKind::Anthropic, "a"),
        ]);
        let r = s.resolve(None).unwrap();
        assert_eq!(r.kind, BackendKind::Anthropic);
        assert_eq!(r.key.unwrap().expose_secret(), "a");
        let s = settings(&[(BackendKind::Openai, "o"), (BackendKind::Hermes, "h")]);
        assert_eq!(s.resolve(None).unwrap().kind, BackendKind::Hermes);
    }

    #[test]
    fn workspace_value_overrides_and_empty_value_clears() {
        let s = settings(&[(BackendKind::Anthropic, "global")]);
        let clear = WorkspaceSecrets::from([
            ("ANTHROPIC_API_KEY".into(), "".into()),
            ("GEMINI_API_KEY".into(), "ws-gemini".into()),
        ]);
        let r = s.resolve(Some(&clear)).unwrap();
        assert_eq!(r.kind, BackendKind::Gemini);
        assert_eq!(r.key.unwrap().expose_secret(), "ws-gemini");
        let own = WorkspaceSecrets::from([("ANTHROPIC_API_KEY".into(), "ws-anthropic".into())]);
        let r = s.resolve(Some(&own)).unwrap();
        assert_eq!(r.key.unwrap().expose_secret(), "ws-anthropic");
        let only_clear = WorkspaceSecrets::from([("ANTHROPIC_API_KEY".into(), " ".into())]);
        let e = s.resolve(Some(&only_clear)).unwrap_err();
        assert!(e.contains("HERMES_API_KEY, OPENROUTER_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENAI_API_KEY"), "{e}");
    }

    #[test]
    fn forced_provider_needs_its_key_except_mock_and_ollama() {
        let mut s = settings(&[(BackendKind::Openai, "o")]);
        s.forced = Some(BackendKind::Gemini);
        assert!(s.resolve(None).unwrap_err().contains("GEMINI_API_KEY"));
        s.forced = Some(BackendKind::Mock);
        assert_eq!(s.resolve(None).unwrap().kind, BackendKind::Mock);
        s.forced = Some(BackendKind::Ollama);
        assert_eq!(s.resolve(None).unwrap().kind, BackendKind::Ollama);
    }

    #[test]
    fn backend_names_parse() {
        for k in BackendKind::ALL {
            assert_eq!(k.as_str().parse::<BackendKind>().unwrap(), k);
        }
        assert!("claude".parse::<BackendKind>().is_err());
    }
}

#[cfg(test)]
mod preset_tests {
    use super::*;

    #[test]
    fn each_preset_has_its_own_key_variable_and_default_base_url() {
        let defaults = ProviderSettings::default();
        let expected = [
            (
                BackendKind::Deepseek,
                "DEEPSEEK_API_KEY",
                "https://api.deepseek.com/v1",
            ),
            (
                BackendKind::Groq,
                "GROQ_API_KEY",
                "https://api.groq.com/openai/v1",
            ),
            (
                BackendKind::Together,
                "TOGETHER_API_KEY",
                "https://api.together.xyz/v1",
            ),
            (
                BackendKind::Mistral,
                "MISTRAL_API_KEY",
                "https://api.mistral.ai/v1",
            ),
            (
                BackendKind::Fireworks,
                "FIREWORKS_API_KEY",
                "https://api.fireworks.ai/inference/v1",
            ),
            (BackendKind::Xai, "XAI_API_KEY", "https://api.x.ai/v1"),
        ];
        assert_eq!(expected.map(|e| e.0), BackendKind::PRESETS);
        for (kind, key_var, base) in expected {
            assert_eq!(kind.key_var(), Some(key_var));
            assert_eq!(defaults.base_url(kind).as_str(), base, "{kind}");
        }
    }

    #[test]
    fn presets_are_chosen_by_name_never_by_key_priority() {
        let mut s = ProviderSettings::default();
        s.keys
            .insert(BackendKind::Deepseek, SecretString::from("ds".to_string()));
        s.keys
            .insert(BackendKind::Xai, SecretString::from("x".to_string()));
        assert!(
            s.resolve(None).is_err(),
            "a preset's key alone picks no default"
        );
        assert_eq!(
            s.pinned(BackendKind::Xai, None).unwrap().kind,
            BackendKind::Xai
        );
        s.forced = Some(BackendKind::Deepseek);
        assert_eq!(s.resolve(None).unwrap().kind, BackendKind::Deepseek);
        s.forced = Some(BackendKind::Groq);
        assert!(s.resolve(None).unwrap_err().contains("GROQ_API_KEY"));
    }
}
