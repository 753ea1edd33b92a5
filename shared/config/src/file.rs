//! The optional TOML file as parsed (tiers, models and prices, the API, per-platform rate
//! limits, the channels, the sections of the router, llm and tools stages and MCP servers),
//! with its built-in defaults and its validation. `Config::from_lookup` moves each section
//! to where the services read it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use hermes_types::model::Tier;

use crate::{
    BackendKind, ChannelsSettings, LlmSettings, McpServerSettings, RateLimit, RouterSettings,
    ToolsSettings,
};

/// `[ingest]` of the TOML file, whose rates move into `Config::ingest` at load.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestFile {
    /// Per-sender inbound limits by platform name (`telegram`, `whatsapp`, `instagram`, `slack`, `rest`);
    /// platforms not named use HERMES_INBOUND_PER_MINUTE / HERMES_INBOUND_BURST.
    pub rate_limits: BTreeMap<String, RateLimit>,
}

/// The TOML file as parsed: `Config::from_lookup` hands each section to the settings of
/// the service that reads it (`[ingest]`, `[router]`, `[llm]`, `[tools]`, completed with
/// their environment) or to the top of `Config` (the sections several services read). A
/// process reads `Config`; this is also what a reload re-reads (`FileConfig::reread`),
/// whose service sections then hold their environment fields' declared defaults: a
/// reload applies what the file holds and keeps the rest from `Config`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileConfig {
    /// `[tiers]`: tier → ordered model names (the failover chain): logical names of
    /// `[models]`, or `provider:model`, which load adds to `[models]` under that name.
    pub tiers: BTreeMap<Tier, Vec<String>>,
    /// `[models]`: logical model name (or `provider:model`) → provider model id and limits.
    pub models: BTreeMap<String, ModelSpec>,
    /// `[api]`: the HTTP API.
    pub api: ApiSettings,
    /// `[ingest]`: per-platform inbound rates (into `Config::ingest`).
    pub ingest: IngestFile,
    /// `[channels]`: how the chat channels behave: Telegram groups and edits, WhatsApp's
    /// templates.
    pub channels: ChannelsSettings,
    /// `[router]` (into `Config::router`).
    pub router: RouterSettings,
    /// `[llm]` (into `Config::llm`).
    pub llm: LlmSettings,
    /// `[tools]` (into `Config::tools`).
    pub tools: ToolsSettings,
    /// `[mcp_servers.<name>]`: MCP servers the tools stage connects to, by name.
    pub mcp_servers: BTreeMap<String, McpServerSettings>,
}

/// One logical model.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// The id sent to the provider.
    pub id: String,
    /// The backend that serves this model; absent: the default provider (by key priority).
    #[serde(default)]
    pub backend: Option<BackendKind>,
    pub max_output_tokens: u32,
    /// US dollars per million input tokens, as a decimal string (`"0.80"`).
    #[serde(default)]
    pub input_price: Price,
    /// US dollars per million output tokens, as a decimal string (`"4.00"`).
    #[serde(default)]
    pub output_price: Price,
}

impl ModelSpec {
    /// What a call with this usage costs, in micro-dollars (rounded half up).
    pub fn cost_micro_usd(&self, input_tokens: u64, output_tokens: u64) -> u64 {
        let micro = u128::from(input_tokens) * u128::from(self.input_price.0)
            + u128::from(output_tokens) * u128::from(self.output_price.0);
        u64::try_from((micro + 500_000) / 1_000_000).unwrap_or(u64::MAX)
    }
}

/// A price in micro-dollars per million tokens, written in configuration as a decimal
/// string of dollars (`"3.00"`): money is never a float here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Price(pub u64);

impl Price {
    /// `"0.80"` → 800,000 micro-dollars; at most six decimals, no sign, no exponent.
    pub fn parse(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a price in dollars such as \"0.80\"");
        let (whole, frac) = s.trim().split_once('.').unwrap_or((s.trim(), ""));
        if whole.is_empty() && frac.is_empty()
            || !whole.chars().all(|c| c.is_ascii_digit())
            || !frac.chars().all(|c| c.is_ascii_digit())
            || frac.len() > 6
        {
            return Err(bad());
        }
        let whole: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad())?
        };
        let frac: u64 = format!("{frac:0<6}").parse().map_err(|_| bad())?;
        whole
            .checked_mul(1_000_000)
            .and_then(|w| w.checked_add(frac))
            .map(Price)
            .ok_or_else(bad)
    }
}

impl<'de> Deserialize<'de> for Price {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Price::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Settings of the OpenAI-compatible API surface.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiSettings {
    /// Tier whose chain answers API callers.
    pub tier: Tier,
    /// Name advertised by `/v1/models` and echoed in responses (`API_SERVER_MODEL_NAME`
    /// wins over it).
    pub model_name: String,
    /// The operator's core system prompt of the API surface, placed before the caller's own
    /// system messages (`docs/api.md`, core prompt). With `core_prompt_file`, the file's text.
    pub core_prompt: Option<String>,
    /// A file holding the core prompt (relative to the configuration file), read at start
    /// and on every reload; exclusive with `core_prompt`.
    pub core_prompt_file: Option<PathBuf>,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            tier: Tier::Free,
            model_name: "hermes".into(),
            core_prompt: None,
            core_prompt_file: None,
        }
    }
}

impl ApiSettings {
    /// The core prompt to layer under API conversations, if any (blank counts as none).
    pub fn core_prompt(&self) -> Option<&str> {
        self.core_prompt.as_deref().filter(|p| !p.trim().is_empty())
    }

    /// Read `core_prompt_file` (relative to `config_dir`) into `core_prompt`.
    pub(crate) fn load_core_prompt(
        &mut self,
        config_dir: Option<&Path>,
        problems: &mut Vec<String>,
    ) {
        let Some(file) = &self.core_prompt_file else {
            return;
        };
        if self.core_prompt.is_some() {
            problems.push("api: set core_prompt or core_prompt_file, not both".into());
            return;
        }
        let path = match config_dir {
            Some(dir) if file.is_relative() => dir.join(file),
            _ => file.clone(),
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => self.core_prompt = Some(text),
            Err(e) => problems.push(format!(
                "api.core_prompt_file: cannot read {}: {e}",
                path.display()
            )),
        }
    }
}

impl Default for FileConfig {
    /// The seed's values: free → haiku; starter → haiku then ollama; pro → sonnet;
    /// venue-growth → sonnet then haiku.
    fn default() -> Self {
        let chain = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let tiers = BTreeMap::from([
            (Tier::Free, chain(&["claude-haiku"])),
            (Tier::Starter, chain(&["claude-haiku", "ollama"])),
            (Tier::Pro, chain(&["claude-sonnet"])),
            (Tier::VenueGrowth, chain(&["claude-sonnet", "claude-haiku"])),
        ]);
        let models = BTreeMap::from([
            (
                "claude-haiku".to_string(),
                ModelSpec {
                    id: "claude-haiku-4-5-20251001".into(),
                    backend: None,
                    max_output_tokens: 1024,
                    input_price: Price(800_000),
                    output_price: Price(4_000_000),
                },
            ),
            (
                "claude-sonnet".to_string(),
                ModelSpec {
                    id: "claude-sonnet-4-6".into(),
                    backend: None,
                    max_output_tokens: 2048,
                    input_price: Price(3_000_000),
                    output_price: Price(15_000_000),
                },
            ),
            (
                "ollama".to_string(),
                ModelSpec {
                    id: "llama3.1".into(),
                    backend: Some(BackendKind::Ollama),
                    max_output_tokens: 1024,
                    input_price: Price(0),
                    output_price: Price(0),
                },
            ),
        ]);
        Self {
            tiers,
            models,
            api: ApiSettings::default(),
            ingest: IngestFile::default(),
            channels: ChannelsSettings::default(),
            router: RouterSettings::default(),
            llm: LlmSettings::default(),
            tools: ToolsSettings::default(),
            mcp_servers: BTreeMap::new(),
        }
    }
}

impl FileConfig {
    /// Read and validate the TOML file at `path` again (a running replica reloading its
    /// configuration); every problem as one line.
    pub fn reread(path: &Path) -> Result<Self, Vec<String>> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| vec![format!("cannot read config file {}: {e}", path.display())])?;
        let mut file = toml::from_str::<FileConfig>(&text)
            .map_err(|e| vec![format!("{}: {}", path.display(), e.to_string().trim())])?;
        let mut problems = Vec::new();
        file.api.load_core_prompt(path.parent(), &mut problems);
        file.expand_model_names(&mut problems);
        file.validate(&mut problems);
        if problems.is_empty() {
            Ok(file)
        } else {
            Err(problems)
        }
    }

    pub(crate) fn validate(&self, problems: &mut Vec<String>) {
        for tier in Tier::ALL {
            match self.tiers.get(&tier) {
                None => problems.push(format!(
                    "tiers: tier {:?} has no model chain",
                    tier.as_str()
                )),
                Some(chain) if chain.is_empty() => problems.push(format!(
                    "tiers: tier {:?} has an empty model chain",
                    tier.as_str()
                )),
                Some(chain) => {
                    for name in chain {
                        if !self.models.contains_key(name) {
                            problems.push(format!(
                                "tiers: tier {:?} names model {name:?}, which is not in [models]",
                                tier.as_str()
                            ));
                        }
                    }
                }
            }
        }
        for (platform, limit) in &self.ingest.rate_limits {
            if !["telegram", "whatsapp", "instagram", "slack", "rest", "api"]
                .contains(&platform.as_str())
            {
                problems.push(format!("ingest.rate_limits: unknown platform {platform:?}"));
            }
            if limit.per_minute == 0 || limit.burst == 0 {
                problems.push(format!(
                    "ingest.rate_limits.{platform}: per_minute and burst must be above 0"
                ));
            }
        }
        for (name, spec) in &self.models {
            if spec.max_output_tokens == 0 {
                problems.push(format!("models.{name}: max_output_tokens must be above 0"));
            }
        }
        self.channels.validate(problems);
        self.router.validate(&self.models, problems);
        self.llm.validate(problems);
        let servers: Vec<&str> = self.mcp_servers.keys().map(String::as_str).collect();
        self.tools.validate(&servers, problems);
        for (name, server) in &self.mcp_servers {
            server.validate(name, problems);
        }
    }
}
