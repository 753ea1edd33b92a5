//! Configuration, read once at start from the environment and an optional TOML file
//! (DESIGN §7), validated into typed structs. Every problem is reported on its own line;
//! secrets are wrapped so they never print.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use url::Url;

use hermes_types::model::Tier;

mod delivery;
mod llm;
mod mcp;
mod router;
mod tools;

pub use delivery::{
    AlertSettings, BreakerSettings, DeliverySettings, InstagramSender, RateGateSettings,
    TelegramSender, WhatsappSender,
};

pub use llm::{
    BackendKind, CacheSettings, LlmSettings, ProviderSettings, Resolved, TierBudget,
    WorkspaceSecrets,
};

pub use router::{
    PersonaSettings, RecallSettings, RouterSecrets, RouterSettings, ToolGateSettings,
};

pub use mcp::{
    AuditLevel, McpSamplingSettings, McpServerSettings, McpToolFilter, McpTransportKind,
    local_host_toolsets, mcp_toolset,
};
pub use tools::{AllowRule, Cidr, HttpFetchSettings, ToolsSettings};

/// One documented environment variable: the single source for `--help`, `doctor` and the README.
pub struct EnvVar {
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
}

/// Every variable Hermes reads, with its default and meaning.
pub const ENV_VARS: &[EnvVar] = &[
    EnvVar {
        name: "DATABASE_URL",
        default: "postgres://postgres:postgres@127.0.0.1:5432/hermes",
        help: "PostgreSQL connection URL (the truth: runs, outbox, idempotency)",
    },
    EnvVar {
        name: "AMQP_URL",
        default: "amqp://guest:guest@127.0.0.1:5672/%2f",
        help: "RabbitMQ connection URL (the bus)",
    },
    EnvVar {
        name: "REDIS_URL",
        default: "redis://127.0.0.1:6379",
        help: "Redis connection URL (caches, counters, run event streams)",
    },
    EnvVar {
        name: "HERMES_NAMESPACE",
        default: "hermes",
        help: "prefix of every queue and Redis key; two installs on one broker use two namespaces",
    },
    EnvVar {
        name: "HERMES_CONFIG",
        default: "(none)",
        help: "path of the TOML file with tiers, model chains and API settings (same as --config)",
    },
    EnvVar {
        name: "HERMES_HTTP_ADDR",
        default: "0.0.0.0:8080",
        help: "public HTTP address of ingest",
    },
    EnvVar {
        name: "HERMES_ADMIN_ADDR",
        default: "0.0.0.0:9090",
        help: "admin address: /metrics, /healthz, /readyz",
    },
    EnvVar {
        name: "HERMES_LOG_FORMAT",
        default: "json",
        help: "log format: json (production) or text",
    },
    EnvVar {
        name: "RUST_LOG",
        default: "info",
        help: "log filter, e.g. info,hermes_llm=debug",
    },
    EnvVar {
        name: "API_SERVER_KEY",
        default: "(none)",
        help: "Bearer key of the HTTP API, at least 16 characters; required unless ingest binds to loopback",
    },
    EnvVar {
        name: "HERMES_PROVIDER",
        default: "(by key)",
        help: "force a model backend: mock, hermes, openrouter, anthropic, gemini, openai or ollama",
    },
    EnvVar {
        name: "HERMES_MODEL",
        default: "(from the model map)",
        help: "model id sent to the default provider for every call, overriding the model map",
    },
    EnvVar {
        name: "HERMES_API_KEY",
        default: "(none)",
        help: "key of the Hermes inference gateway (OpenAI-compatible); first in key priority",
    },
    EnvVar {
        name: "HERMES_BASE_URL",
        default: "https://inference-api.nousresearch.com/v1",
        help: "base URL of the Hermes inference gateway",
    },
    EnvVar {
        name: "OPENROUTER_API_KEY",
        default: "(none)",
        help: "key of OpenRouter (OpenAI-compatible); second in key priority",
    },
    EnvVar {
        name: "OPENROUTER_BASE_URL",
        default: "https://openrouter.ai/api/v1",
        help: "base URL of OpenRouter",
    },
    EnvVar {
        name: "ANTHROPIC_API_KEY",
        default: "(none)",
        help: "key of Anthropic's native Messages API; third in key priority",
    },
    EnvVar {
        name: "ANTHROPIC_BASE_URL",
        default: "https://api.anthropic.com",
        help: "base URL of the Anthropic API (the path /v1/messages is appended)",
    },
    EnvVar {
        name: "ANTHROPIC_VERSION",
        default: "2023-06-01",
        help: "anthropic-version header sent with every Anthropic call",
    },
    EnvVar {
        name: "GEMINI_API_KEY",
        default: "(none)",
        help: "key of Google's native Gemini API; fourth in key priority",
    },
    EnvVar {
        name: "GEMINI_BASE_URL",
        default: "https://generativelanguage.googleapis.com/v1beta",
        help: "base URL of the Gemini API (models/{id}:generateContent is appended)",
    },
    EnvVar {
        name: "OPENAI_API_KEY",
        default: "(none)",
        help: "key of OpenAI or any OpenAI-compatible endpoint; last in key priority",
    },
    EnvVar {
        name: "OPENAI_BASE_URL",
        default: "https://api.openai.com/v1",
        help: "base URL of the OpenAI-compatible provider",
    },
    EnvVar {
        name: "OLLAMA_BASE_URL",
        default: "http://127.0.0.1:11434/v1",
        help: "base URL of a local Ollama server (models with backend = \"ollama\"; no tools, no key)",
    },
    EnvVar {
        name: "LLM_GLOBAL_DAILY_BUDGET_USD",
        default: "(none: no cap)",
        help: "platform-wide spend cap per UTC day in dollars, e.g. \"250.00\"; above it every model call is refused until midnight",
    },
    EnvVar {
        name: "HERMES_LLM_TIMEOUT_SECS",
        default: "45",
        help: "deadline of one model call across all failover hops",
    },
    EnvVar {
        name: "HERMES_RUN_TIMEOUT_SECS",
        default: "120",
        help: "how long an API caller waits for its run's answer before 504",
    },
    EnvVar {
        name: "HERMES_MAX_BODY_BYTES",
        default: "1048576",
        help: "largest accepted request body; larger is 413",
    },
    EnvVar {
        name: "HERMES_MAX_IN_FLIGHT",
        default: "1024",
        help: "HTTP requests ingest handles at once; beyond, it answers 503 with Retry-After instead of queueing",
    },
    EnvVar {
        name: "HERMES_SHUTDOWN_GRACE_SECS",
        default: "30",
        help: "how long SIGTERM waits for in-flight work before exiting",
    },
    EnvVar {
        name: "HERMES_DB_POOL_SIZE",
        default: "16",
        help: "PostgreSQL connections per process",
    },
    EnvVar {
        name: "HERMES_PREFETCH",
        default: "32",
        help: "unacknowledged messages per consumer (its concurrency)",
    },
    EnvVar {
        name: "HERMES_COMMIT_GROUP",
        default: "16",
        help: "most messages the router commits in one PostgreSQL transaction (group commit); 1 commits each alone",
    },
    EnvVar {
        name: "HERMES_DELIVERY_LIMIT",
        default: "5",
        help: "deliveries of one message before it is parked in its .dead queue",
    },
    EnvVar {
        name: "HERMES_PUBLISH_WINDOW",
        default: "512",
        help: "publishes awaiting broker confirms at once",
    },
    EnvVar {
        name: "HERMES_BUS_RECONNECT_SECS",
        default: "60",
        help: "how long to try to reconnect to RabbitMQ before exiting non-zero",
    },
    EnvVar {
        name: "HERMES_DELIVERY_RETRY_DELAYS",
        default: "60,300,1500",
        help: "seconds a failed delivery or agent webhook waits before each queued retry (one wait queue per delay); after the last it is parked",
    },
    EnvVar {
        name: "TELEGRAM_WEBHOOK_SECRET",
        default: "(none: route off)",
        help: "secret Telegram sends in X-Telegram-Bot-Api-Secret-Token; enables POST /webhooks/telegram",
    },
    EnvVar {
        name: "WHATSAPP_VERIFY_TOKEN",
        default: "(none: route off)",
        help: "token of Meta's subscription handshake; enables GET /webhooks/whatsapp",
    },
    EnvVar {
        name: "WHATSAPP_APP_SECRET",
        default: "(none: route off)",
        help: "app secret that signs X-Hub-Signature-256; enables POST /webhooks/whatsapp",
    },
    EnvVar {
        name: "D360_WEBHOOK_TOKEN",
        default: "(none: route off)",
        help: "shared token 360dialog sends (header or path segment); enables POST /webhooks/360dialog",
    },
    EnvVar {
        name: "D360_WEBHOOK_TOKEN_HEADER",
        default: "x-hermes-webhook-token",
        help: "header carrying D360_WEBHOOK_TOKEN (or POST /webhooks/360dialog/<token>)",
    },
    EnvVar {
        name: "INSTAGRAM_VERIFY_TOKEN",
        default: "(none: route off)",
        help: "token of Meta's subscription handshake; enables GET /webhooks/instagram",
    },
    EnvVar {
        name: "INSTAGRAM_APP_SECRET",
        default: "(none: route off)",
        help: "app secret that signs X-Hub-Signature-256; enables POST /webhooks/instagram",
    },
    EnvVar {
        name: "TELEGRAM_BOT_TOKEN",
        default: "(none: telegram replies parked)",
        help: "bot token of Telegram's Bot API; enables sending Telegram replies",
    },
    EnvVar {
        name: "TELEGRAM_API_BASE_URL",
        default: "https://api.telegram.org",
        help: "base URL of Telegram's Bot API (/bot<token>/sendMessage is appended)",
    },
    EnvVar {
        name: "WHATSAPP_SENDER",
        default: "(by key)",
        help: "how WhatsApp replies are sent: 360dialog or cloud; needed only when both keys are set",
    },
    EnvVar {
        name: "D360_API_KEY",
        default: "(none)",
        help: "360dialog API key (D360-API-KEY header); enables sending WhatsApp replies through 360dialog",
    },
    EnvVar {
        name: "D360_BASE_URL",
        default: "https://waba-v2.360dialog.io",
        help: "base URL of 360dialog's WhatsApp API (/messages is appended)",
    },
    EnvVar {
        name: "WHATSAPP_ACCESS_TOKEN",
        default: "(none)",
        help: "Bearer token of Meta's WhatsApp Cloud API; enables sending WhatsApp replies through it",
    },
    EnvVar {
        name: "WHATSAPP_PHONE_NUMBER_ID",
        default: "(none)",
        help: "phone number id replies are sent from with the Cloud API",
    },
    EnvVar {
        name: "WHATSAPP_API_BASE_URL",
        default: "https://graph.facebook.com/v21.0",
        help: "base URL of the WhatsApp Cloud API (/{phone number id}/messages is appended)",
    },
    EnvVar {
        name: "INSTAGRAM_ACCESS_TOKEN",
        default: "(none: instagram replies parked)",
        help: "page access token of the Instagram Graph API (access_token parameter); enables sending Instagram replies",
    },
    EnvVar {
        name: "INSTAGRAM_API_BASE_URL",
        default: "https://graph.facebook.com/v21.0",
        help: "base URL of the Instagram Graph API (/me/messages is appended)",
    },
    EnvVar {
        name: "HERMES_SEND_PAUSES_MS",
        default: "1000,3000,9000",
        help: "pauses between the in-call tries of one outbound send (jittered 20%)",
    },
    EnvVar {
        name: "HERMES_MAX_RETRY_AFTER_SECS",
        default: "30",
        help: "longest Retry-After waited within a send; longer ends the send as rate_limited for the queued retry",
    },
    EnvVar {
        name: "HERMES_BREAKER_THRESHOLD",
        default: "10",
        help: "consecutive failed sends to a platform that open its circuit breaker",
    },
    EnvVar {
        name: "HERMES_BREAKER_WINDOW_SECS",
        default: "300",
        help: "sliding window in which those failures must fall",
    },
    EnvVar {
        name: "HERMES_BREAKER_OPEN_SECS",
        default: "120",
        help: "how long an open breaker skips sends to its platform",
    },
    EnvVar {
        name: "HERMES_DELIVERY_CHAT_PER_SEC",
        default: "1",
        help: "outbound messages per second to one chat (token bucket in Redis)",
    },
    EnvVar {
        name: "HERMES_DELIVERY_CHAT_BURST",
        default: "1",
        help: "outbound messages to one chat that may go at once",
    },
    EnvVar {
        name: "HERMES_DELIVERY_BOT_PER_SEC",
        default: "25",
        help: "outbound messages per second through one bot token, phone number or account",
    },
    EnvVar {
        name: "HERMES_RATE_GATE_WAIT_SECS",
        default: "30",
        help: "longest a send waits at the rate gate before it is retried later instead",
    },
    EnvVar {
        name: "HERMES_WEBHOOK_ALLOW",
        default: "(none)",
        help: "comma-separated host names or CIDR ranges agent webhook URLs may reach although not public (else refused)",
    },
    EnvVar {
        name: "HERMES_ALERT_SLACK_URL",
        default: "(none)",
        help: "Slack incoming-webhook URL that receives ops alerts",
    },
    EnvVar {
        name: "HERMES_ALERT_DISCORD_URL",
        default: "(none)",
        help: "Discord webhook URL that receives ops alerts",
    },
    EnvVar {
        name: "HERMES_ALERT_DEDUPE_SECS",
        default: "300",
        help: "one alert of a kind (and subject) per this many seconds, across replicas",
    },
    EnvVar {
        name: "HERMES_ALERT_PARKING_ABOVE",
        default: "100",
        help: "a parking queue holding more messages than this raises an alert",
    },
    EnvVar {
        name: "HERMES_INBOUND_PER_MINUTE",
        default: "20",
        help: "messages one sender may send per minute before being slowed down (per platform in [ingest.rate_limits])",
    },
    EnvVar {
        name: "HERMES_INBOUND_BURST",
        default: "10",
        help: "messages one sender may send at once before the per-minute rate applies",
    },
    EnvVar {
        name: "HERMES_EMBEDDINGS_URL",
        default: "(none: recall off)",
        help: "base URL of an OpenAI-compatible embeddings endpoint for semantic recall, e.g. https://api.openai.com/v1",
    },
    EnvVar {
        name: "HERMES_EMBEDDINGS_API_KEY",
        default: "(none)",
        help: "Bearer key of the embeddings endpoint",
    },
    EnvVar {
        name: "HERMES_SESSION_KEYS",
        default: "(none: history from PostgreSQL)",
        help: "comma-separated Fernet keys of the session-history cache in Redis, newest first (the first encrypts, all decrypt)",
    },
    EnvVar {
        name: "HERMES_SECRET_KEYS",
        default: "(none)",
        help: "comma-separated Fernet keys that encrypt agent webhook secrets at rest, newest first; needed to create external agents",
    },
    EnvVar {
        name: "HERMES_QUEUE_EXPIRES_SECS",
        default: "(never)",
        help: "delete queues unused this long (for throw-away namespaces such as tests)",
    },
];

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

/// The prefix of every queue and Redis key of one installation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Namespace(String);

impl Namespace {
    pub fn parse(s: &str) -> Result<Self, String> {
        let ok = !s.is_empty()
            && s.len() <= 40
            && s.starts_with(|c: char| c.is_ascii_lowercase())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(format!(
                "HERMES_NAMESPACE={s:?} must be 1-40 characters of a-z, 0-9, '_' or '-', starting with a letter"
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Bus settings.
#[derive(Clone, Debug)]
pub struct BusSettings {
    pub prefetch: u16,
    /// Most messages a grouped stage commits in one transaction (1: each alone).
    pub commit_group: usize,
    pub delivery_limit: u32,
    pub publish_window: usize,
    pub reconnect_timeout: Duration,
    pub queue_expires: Option<Duration>,
    /// Waits before each queued retry of the stages that retry later (delivery, webhooks);
    /// after the last one a failing message is parked.
    pub retry_delays: Vec<Duration>,
}

/// The secrets that enable and verify each channel's webhook routes. A route whose secret
/// is not set answers 404: a channel is never open by default.
#[derive(Clone, Debug, Default)]
pub struct ChannelSecrets {
    pub telegram_webhook_secret: Option<SecretString>,
    pub whatsapp_verify_token: Option<SecretString>,
    pub whatsapp_app_secret: Option<SecretString>,
    pub d360_webhook_token: Option<SecretString>,
    pub d360_token_header: String,
    pub instagram_verify_token: Option<SecretString>,
    pub instagram_app_secret: Option<SecretString>,
}

/// A token bucket: `burst` at once, refilled at `per_minute`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub per_minute: u32,
    pub burst: u32,
}

/// Ingest settings from the TOML file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IngestSettings {
    /// Per-sender inbound limits by platform name (`telegram`, `whatsapp`, `instagram`, `rest`);
    /// platforms not named use HERMES_INBOUND_PER_MINUTE / HERMES_INBOUND_BURST.
    pub rate_limits: BTreeMap<String, RateLimit>,
}

/// The structured part of the configuration, from the TOML file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileConfig {
    /// Tier → ordered logical model names (the failover chain).
    pub tiers: BTreeMap<Tier, Vec<String>>,
    /// Logical model name → provider model id and limits.
    pub models: BTreeMap<String, ModelSpec>,
    /// The HTTP API.
    pub api: ApiSettings,
    /// Channel webhooks.
    pub ingest: IngestSettings,
    /// The routing pipeline.
    pub router: RouterSettings,
    /// The llm stage: backpressure, timeouts, cache, budgets.
    pub llm: LlmSettings,
    /// The tools stage: limits and allowlist of the built-in tools.
    pub tools: ToolsSettings,
    /// MCP servers the tools stage connects to, by name.
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
    /// Name advertised by `/v1/models` and echoed in responses.
    pub model_name: String,
}

impl Default for ApiSettings {
    fn default() -> Self {
        Self {
            tier: Tier::Free,
            model_name: "hermes".into(),
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
            ingest: IngestSettings::default(),
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
        let file = toml::from_str::<FileConfig>(&text)
            .map_err(|e| vec![format!("{}: {}", path.display(), e.to_string().trim())])?;
        let mut problems = Vec::new();
        file.validate(&mut problems);
        if problems.is_empty() {
            Ok(file)
        } else {
            Err(problems)
        }
    }

    fn validate(&self, problems: &mut Vec<String>) {
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
            if !["telegram", "whatsapp", "instagram", "rest", "api"].contains(&platform.as_str()) {
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
        self.router.validate(&self.models, problems);
        self.llm.validate(problems);
        self.tools.validate(problems);
        for (name, server) in &self.mcp_servers {
            server.validate(name, problems);
        }
    }
}

/// The whole effective configuration of a process.
#[derive(Clone, Debug)]
pub struct Config {
    pub database_url: SecretString,
    pub amqp_url: SecretString,
    pub redis_url: SecretString,
    pub namespace: Namespace,
    pub http_addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub log_format: LogFormat,
    pub api_server_key: Option<SecretString>,
    pub provider: ProviderSettings,
    /// `LLM_GLOBAL_DAILY_BUDGET_USD` in micro-dollars (`None`: no cap).
    pub global_daily_budget_micro_usd: Option<u64>,
    pub llm_timeout: Duration,
    pub run_timeout: Duration,
    pub max_body_bytes: usize,
    pub max_in_flight: usize,
    pub shutdown_grace: Duration,
    pub db_pool_size: usize,
    pub bus: BusSettings,
    pub channels: ChannelSecrets,
    /// Default per-sender inbound limit (platforms may override in the file).
    pub inbound_rate: RateLimit,
    pub router: RouterSecrets,
    /// Channel senders, send retries, breaker and rate gate of the delivery stage.
    pub delivery: DeliverySettings,
    /// Where ops alerts go.
    pub alerts: AlertSettings,
    pub file: FileConfig,
    pub config_path: Option<PathBuf>,
}

/// Everything wrong with the configuration, one problem per line.
#[derive(Debug, thiserror::Error)]
pub struct ConfigError {
    pub problems: Vec<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration:")?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

/// Reads typed values from an environment, collecting problems instead of stopping at the first.
struct Reader<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    problems: Vec<String>,
}

impl Reader<'_> {
    fn raw(&self, name: &str) -> Option<String> {
        (self.env)(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    fn default_of(name: &str) -> &'static str {
        ENV_VARS
            .iter()
            .find(|v| v.name == name)
            .map(|v| v.default)
            .expect("every variable read is documented in ENV_VARS")
    }

    fn parsed<T: FromStr>(&mut self, name: &str) -> Option<T>
    where
        T::Err: fmt::Display,
    {
        let value = self
            .raw(name)
            .unwrap_or_else(|| Self::default_of(name).to_string());
        match value.parse() {
            Ok(v) => Some(v),
            Err(e) => {
                self.problems
                    .push(format!("{name}={value:?} is invalid: {e}"));
                None
            }
        }
    }

    fn secret(&self, name: &str) -> Option<SecretString> {
        self.raw(name).map(SecretString::from)
    }

    /// A comma-separated list of Fernet keys; a malformed one is a problem named by position
    /// (never by value).
    fn fernet_keys(&mut self, name: &str) -> Vec<SecretString> {
        let Some(raw) = self.raw(name) else {
            return Vec::new();
        };
        let mut keys = Vec::new();
        for (i, key) in raw.split(',').map(str::trim).enumerate() {
            if fernet::Fernet::new(key).is_none() {
                self.problems.push(format!(
                    "{name}: key {} is not a Fernet key (32 bytes, URL-safe base64)",
                    i + 1
                ));
            } else {
                keys.push(SecretString::from(key.to_string()));
            }
        }
        keys
    }

    fn url(&mut self, name: &str, schemes: &[&str]) -> SecretString {
        let value = self
            .raw(name)
            .unwrap_or_else(|| Self::default_of(name).to_string());
        match Url::parse(&value) {
            Ok(u) if schemes.contains(&u.scheme()) => {}
            Ok(u) => self.problems.push(format!(
                "{name} has scheme {:?}; expected {}",
                u.scheme(),
                schemes.join(" or ")
            )),
            Err(e) => self
                .problems
                .push(format!("{name} is not a URL ({e}): {}", mask_url(&value))),
        }
        SecretString::from(value)
    }

    /// A comma-separated list of positive whole seconds, e.g. `60,300,1500`.
    fn delays(&mut self, name: &str) -> Vec<Duration> {
        let value = self
            .raw(name)
            .unwrap_or_else(|| Self::default_of(name).to_string());
        let parsed: Result<Vec<Duration>, _> = value
            .split(',')
            .map(|s| match s.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(Duration::from_secs(n)),
                _ => Err(()),
            })
            .collect();
        match parsed {
            Ok(d) => d,
            Err(()) => {
                self.problems.push(format!(
                    "{name}={value:?} must be comma-separated positive seconds, e.g. 60,300,1500"
                ));
                Vec::new()
            }
        }
    }

    fn secs(&mut self, name: &str) -> Duration {
        Duration::from_secs(self.parsed::<u64>(name).unwrap_or(1))
    }
}

impl Config {
    /// Read the configuration from the process environment and `config_path` (or `HERMES_CONFIG`).
    pub fn from_env(config_path: Option<&Path>) -> Result<Self, ConfigError> {
        Self::from_lookup(&|name| std::env::var(name).ok(), config_path)
    }

    /// Read the configuration from any variable lookup (tests pass a map).
    pub fn from_lookup(
        env: &dyn Fn(&str) -> Option<String>,
        config_path: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let mut r = Reader {
            env,
            problems: Vec::new(),
        };

        let database_url = r.url("DATABASE_URL", &["postgres", "postgresql"]);
        let amqp_url = r.url("AMQP_URL", &["amqp", "amqps"]);
        let redis_url = r.url("REDIS_URL", &["redis", "rediss"]);
        let namespace =
            match Namespace::parse(&r.raw("HERMES_NAMESPACE").unwrap_or_else(|| "hermes".into())) {
                Ok(ns) => Some(ns),
                Err(e) => {
                    r.problems.push(e);
                    None
                }
            };
        let http_addr = r.parsed::<SocketAddr>("HERMES_HTTP_ADDR");
        let admin_addr = r.parsed::<SocketAddr>("HERMES_ADMIN_ADDR");
        let log_format = match r.raw("HERMES_LOG_FORMAT").as_deref() {
            None | Some("json") => LogFormat::Json,
            Some("text") => LogFormat::Text,
            Some(other) => {
                r.problems
                    .push(format!("HERMES_LOG_FORMAT={other:?} must be json or text"));
                LogFormat::Json
            }
        };
        let api_server_key = r.secret("API_SERVER_KEY");
        if api_server_key
            .as_ref()
            .is_some_and(|k| k.expose_secret().chars().count() < 16)
        {
            r.problems
                .push("API_SERVER_KEY is shorter than 16 characters".into());
        }
        let forced = match r.raw("HERMES_PROVIDER") {
            Some(p) => match p.parse::<BackendKind>() {
                Ok(k) => Some(k),
                Err(e) => {
                    r.problems.push(format!("HERMES_PROVIDER: {e}"));
                    None
                }
            },
            None => None,
        };
        let mut keys = BTreeMap::new();
        let mut base_urls = BTreeMap::new();
        for kind in BackendKind::ALL {
            if let Some(key) = kind.key_var().and_then(|v| r.secret(v)) {
                keys.insert(kind, key);
            }
            if let Some(var) = kind.base_url_var() {
                let raw = r.raw(var).unwrap_or_else(|| Reader::default_of(var).into());
                match Url::parse(&raw) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") => {
                        base_urls.insert(kind, u);
                    }
                    _ => r.problems.push(format!("{var} must be an http(s) URL")),
                }
            }
        }
        let provider = Some(ProviderSettings {
            forced,
            model_override: r.raw("HERMES_MODEL"),
            keys,
            base_urls,
            anthropic_version: r
                .raw("ANTHROPIC_VERSION")
                .unwrap_or_else(|| Reader::default_of("ANTHROPIC_VERSION").into()),
        });
        let global_daily_budget_micro_usd = match r.raw("LLM_GLOBAL_DAILY_BUDGET_USD") {
            Some(v) => match Price::parse(&v) {
                Ok(p) => Some(p.0),
                Err(e) => {
                    r.problems.push(format!("LLM_GLOBAL_DAILY_BUDGET_USD: {e}"));
                    None
                }
            },
            None => None,
        };
        let llm_timeout = r.secs("HERMES_LLM_TIMEOUT_SECS");
        let run_timeout = r.secs("HERMES_RUN_TIMEOUT_SECS");
        let shutdown_grace = r.secs("HERMES_SHUTDOWN_GRACE_SECS");
        let reconnect_timeout = r.secs("HERMES_BUS_RECONNECT_SECS");
        let max_body_bytes = r
            .parsed::<usize>("HERMES_MAX_BODY_BYTES")
            .unwrap_or(1 << 20);
        let max_in_flight = r
            .parsed::<usize>("HERMES_MAX_IN_FLIGHT")
            .unwrap_or(1024)
            .max(1);
        let db_pool_size = r
            .parsed::<usize>("HERMES_DB_POOL_SIZE")
            .unwrap_or(16)
            .max(2);
        let prefetch = r.parsed::<u16>("HERMES_PREFETCH").unwrap_or(32).max(1);
        let commit_group = r
            .parsed::<usize>("HERMES_COMMIT_GROUP")
            .unwrap_or(16)
            .max(1);
        let delivery_limit = r.parsed::<u32>("HERMES_DELIVERY_LIMIT").unwrap_or(5).max(1);
        let publish_window = r
            .parsed::<usize>("HERMES_PUBLISH_WINDOW")
            .unwrap_or(512)
            .max(1);
        let queue_expires = match r.raw("HERMES_QUEUE_EXPIRES_SECS") {
            Some(v) => match v.parse::<u64>() {
                Ok(s) if s > 0 => Some(Duration::from_secs(s)),
                _ => {
                    r.problems.push(format!(
                        "HERMES_QUEUE_EXPIRES_SECS={v:?} must be a positive number of seconds"
                    ));
                    None
                }
            },
            None => None,
        };

        let retry_delays = r.delays("HERMES_DELIVERY_RETRY_DELAYS");

        let channels = ChannelSecrets {
            telegram_webhook_secret: r.secret("TELEGRAM_WEBHOOK_SECRET"),
            whatsapp_verify_token: r.secret("WHATSAPP_VERIFY_TOKEN"),
            whatsapp_app_secret: r.secret("WHATSAPP_APP_SECRET"),
            d360_webhook_token: r.secret("D360_WEBHOOK_TOKEN"),
            d360_token_header: r
                .raw("D360_WEBHOOK_TOKEN_HEADER")
                .unwrap_or_else(|| Reader::default_of("D360_WEBHOOK_TOKEN_HEADER").into())
                .to_ascii_lowercase(),
            instagram_verify_token: r.secret("INSTAGRAM_VERIFY_TOKEN"),
            instagram_app_secret: r.secret("INSTAGRAM_APP_SECRET"),
        };
        if axum_header_name_invalid(&channels.d360_token_header) {
            r.problems
                .push("D360_WEBHOOK_TOKEN_HEADER is not a valid header name".into());
        }
        let inbound_rate = RateLimit {
            per_minute: r
                .parsed::<u32>("HERMES_INBOUND_PER_MINUTE")
                .unwrap_or(20)
                .max(1),
            burst: r.parsed::<u32>("HERMES_INBOUND_BURST").unwrap_or(10).max(1),
        };
        let router = RouterSecrets {
            embeddings_url: r
                .raw("HERMES_EMBEDDINGS_URL")
                .and_then(|v| match Url::parse(&v) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") => Some(u),
                    _ => {
                        r.problems
                            .push("HERMES_EMBEDDINGS_URL must be an http(s) URL".into());
                        None
                    }
                }),
            embeddings_api_key: r.secret("HERMES_EMBEDDINGS_API_KEY"),
            session_keys: r.fernet_keys("HERMES_SESSION_KEYS"),
            secret_keys: r.fernet_keys("HERMES_SECRET_KEYS"),
        };
        let delivery = r.delivery();
        let alerts = r.alerts();
        let config_path = config_path
            .map(Path::to_path_buf)
            .or_else(|| r.raw("HERMES_CONFIG").map(PathBuf::from));
        let file = match &config_path {
            Some(path) => match std::fs::read_to_string(path) {
                Ok(text) => match toml::from_str::<FileConfig>(&text) {
                    Ok(f) => f,
                    Err(e) => {
                        r.problems
                            .push(format!("{}: {}", path.display(), e.to_string().trim()));
                        FileConfig::default()
                    }
                },
                Err(e) => {
                    r.problems
                        .push(format!("cannot read config file {}: {e}", path.display()));
                    FileConfig::default()
                }
            },
            None => FileConfig::default(),
        };
        file.validate(&mut r.problems);

        match (
            namespace,
            http_addr,
            admin_addr,
            provider,
            r.problems.is_empty(),
        ) {
            (Some(namespace), Some(http_addr), Some(admin_addr), Some(provider), true) => {
                Ok(Config {
                    database_url,
                    amqp_url,
                    redis_url,
                    namespace,
                    http_addr,
                    admin_addr,
                    log_format,
                    api_server_key,
                    provider,
                    global_daily_budget_micro_usd,
                    llm_timeout,
                    run_timeout,
                    max_body_bytes,
                    max_in_flight,
                    shutdown_grace,
                    db_pool_size,
                    bus: BusSettings {
                        prefetch,
                        commit_group,
                        delivery_limit,
                        publish_window,
                        reconnect_timeout,
                        queue_expires,
                        retry_delays,
                    },
                    channels,
                    inbound_rate,
                    router,
                    delivery,
                    alerts,
                    file,
                    config_path,
                })
            }
            _ => Err(ConfigError {
                problems: r.problems,
            }),
        }
    }

    /// What ingest needs beyond the common settings: a strong key unless bound to loopback.
    pub fn check_ingest(&self) -> Result<(), ConfigError> {
        if self.api_server_key.is_none() && !self.http_addr.ip().is_loopback() {
            return Err(ConfigError {
                problems: vec![format!(
                    "API_SERVER_KEY is required when ingest listens on {} (not loopback)",
                    self.http_addr
                )],
            });
        }
        Ok(())
    }

    /// What the llm stage needs: a usable provider.
    pub fn check_llm(&self) -> Result<(), ConfigError> {
        self.provider
            .resolve(None)
            .map(|_| ())
            .map_err(|e| ConfigError { problems: vec![e] })
    }

    /// The effective configuration as `NAME=value` lines with secrets masked (for `hermes doctor`).
    pub fn describe(&self) -> Vec<(String, String)> {
        let keys = |k: &[SecretString], without: &str| match k.len() {
            0 => format!("(not set: {without})"),
            n => format!("******** ({n} key{})", if n == 1 { "" } else { "s" }),
        };
        let secret = |s: &Option<SecretString>| match s {
            Some(_) => "******** (set)".to_string(),
            None => "(not set)".to_string(),
        };
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "(not set)".into());
        let rows: Vec<(String, String)> = vec![
            (
                "DATABASE_URL".into(),
                mask_url(self.database_url.expose_secret()),
            ),
            ("AMQP_URL".into(), mask_url(self.amqp_url.expose_secret())),
            ("REDIS_URL".into(), mask_url(self.redis_url.expose_secret())),
            ("HERMES_NAMESPACE".into(), self.namespace.to_string()),
            (
                "HERMES_CONFIG".into(),
                self.config_path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "(none: built-in tiers and models)".into()),
            ),
            ("HERMES_HTTP_ADDR".into(), self.http_addr.to_string()),
            ("HERMES_ADMIN_ADDR".into(), self.admin_addr.to_string()),
            (
                "HERMES_LOG_FORMAT".into(),
                format!("{:?}", self.log_format).to_lowercase(),
            ),
            ("API_SERVER_KEY".into(), secret(&self.api_server_key)),
            (
                "HERMES_PROVIDER".into(),
                match self.provider.resolve(None) {
                    Ok(p) if self.provider.forced.is_some() => format!("{} (forced)", p.kind),
                    Ok(p) => format!("{} (by key)", p.kind),
                    Err(e) => format!("(none: {e})"),
                },
            ),
            ("HERMES_MODEL".into(), opt(&self.provider.model_override)),
        ];
        let mut rows = rows;
        for kind in BackendKind::ALL {
            if let Some(var) = kind.key_var() {
                rows.push((var.into(), secret(&self.provider.keys.get(&kind).cloned())));
            }
            if let Some(var) = kind.base_url_var() {
                rows.push((var.into(), self.provider.base_url(kind).to_string()));
            }
        }
        rows.push((
            "ANTHROPIC_VERSION".into(),
            self.provider.anthropic_version.clone(),
        ));
        rows.push((
            "LLM_GLOBAL_DAILY_BUDGET_USD".into(),
            self.global_daily_budget_micro_usd
                .map(|m| format!("{}.{:06}", m / 1_000_000, m % 1_000_000))
                .unwrap_or_else(|| "(none: no cap)".into()),
        ));
        rows.extend(vec![
            (
                "HERMES_LLM_TIMEOUT_SECS".into(),
                self.llm_timeout.as_secs().to_string(),
            ),
            (
                "HERMES_RUN_TIMEOUT_SECS".into(),
                self.run_timeout.as_secs().to_string(),
            ),
            (
                "HERMES_MAX_BODY_BYTES".into(),
                self.max_body_bytes.to_string(),
            ),
            (
                "HERMES_MAX_IN_FLIGHT".into(),
                self.max_in_flight.to_string(),
            ),
            (
                "HERMES_SHUTDOWN_GRACE_SECS".into(),
                self.shutdown_grace.as_secs().to_string(),
            ),
            ("HERMES_DB_POOL_SIZE".into(), self.db_pool_size.to_string()),
            ("HERMES_PREFETCH".into(), self.bus.prefetch.to_string()),
            (
                "HERMES_COMMIT_GROUP".into(),
                self.bus.commit_group.to_string(),
            ),
            (
                "HERMES_DELIVERY_LIMIT".into(),
                self.bus.delivery_limit.to_string(),
            ),
            (
                "HERMES_PUBLISH_WINDOW".into(),
                self.bus.publish_window.to_string(),
            ),
            (
                "HERMES_BUS_RECONNECT_SECS".into(),
                self.bus.reconnect_timeout.as_secs().to_string(),
            ),
            (
                "HERMES_DELIVERY_RETRY_DELAYS".into(),
                self.bus
                    .retry_delays
                    .iter()
                    .map(|d| d.as_secs().to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "HERMES_QUEUE_EXPIRES_SECS".into(),
                self.bus
                    .queue_expires
                    .map(|d| d.as_secs().to_string())
                    .unwrap_or_else(|| "(never)".into()),
            ),
            (
                "HERMES_EMBEDDINGS_URL".into(),
                self.router
                    .embeddings_url
                    .as_ref()
                    .map(|u| u.to_string())
                    .unwrap_or_else(|| "(not set: semantic recall off)".into()),
            ),
            (
                "HERMES_EMBEDDINGS_API_KEY".into(),
                secret(&self.router.embeddings_api_key),
            ),
            (
                "HERMES_SESSION_KEYS".into(),
                keys(&self.router.session_keys, "history read from PostgreSQL"),
            ),
            (
                "HERMES_SECRET_KEYS".into(),
                keys(
                    &self.router.secret_keys,
                    "external agents cannot be created",
                ),
            ),
            (
                "TELEGRAM_WEBHOOK_SECRET".into(),
                secret(&self.channels.telegram_webhook_secret),
            ),
            (
                "WHATSAPP_VERIFY_TOKEN".into(),
                secret(&self.channels.whatsapp_verify_token),
            ),
            (
                "WHATSAPP_APP_SECRET".into(),
                secret(&self.channels.whatsapp_app_secret),
            ),
            (
                "D360_WEBHOOK_TOKEN".into(),
                secret(&self.channels.d360_webhook_token),
            ),
            (
                "D360_WEBHOOK_TOKEN_HEADER".into(),
                self.channels.d360_token_header.clone(),
            ),
            (
                "INSTAGRAM_VERIFY_TOKEN".into(),
                secret(&self.channels.instagram_verify_token),
            ),
            (
                "INSTAGRAM_APP_SECRET".into(),
                secret(&self.channels.instagram_app_secret),
            ),
            (
                "HERMES_INBOUND_PER_MINUTE".into(),
                self.inbound_rate.per_minute.to_string(),
            ),
            (
                "delivery senders".into(),
                match self.delivery.configured() {
                    c if c.is_empty() => "(none: chat replies are parked)".into(),
                    c => c.join(", "),
                },
            ),
            (
                "TELEGRAM_BOT_TOKEN".into(),
                secret(&self.delivery.telegram.as_ref().map(|t| t.bot_token.clone())),
            ),
            (
                "HERMES_WEBHOOK_ALLOW".into(),
                if self.delivery.webhook_allow.is_empty() {
                    "(none: agent webhooks reach public addresses only)".into()
                } else {
                    self.delivery
                        .webhook_allow
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                },
            ),
            (
                "HERMES_SEND_PAUSES_MS".into(),
                self.delivery
                    .send_pauses
                    .iter()
                    .map(|d| d.as_millis().to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (
                "HERMES_BREAKER_THRESHOLD".into(),
                format!(
                    "{} failures in {}s open for {}s",
                    self.delivery.breaker.threshold,
                    self.delivery.breaker.window.as_secs(),
                    self.delivery.breaker.open_for.as_secs()
                ),
            ),
            (
                "HERMES_DELIVERY_CHAT_PER_SEC".into(),
                format!(
                    "{}/s per chat (burst {}), {}/s per bot",
                    self.delivery.rate_gate.chat_per_sec,
                    self.delivery.rate_gate.chat_burst,
                    self.delivery.rate_gate.bot_per_sec
                ),
            ),
            (
                "HERMES_ALERT_SLACK_URL".into(),
                secret(&self.alerts.slack_url),
            ),
            (
                "HERMES_ALERT_DISCORD_URL".into(),
                secret(&self.alerts.discord_url),
            ),
            (
                "HERMES_INBOUND_BURST".into(),
                self.inbound_rate.burst.to_string(),
            ),
        ]);
        rows
    }
}

fn axum_header_name_invalid(name: &str) -> bool {
    name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Config {
    /// The per-sender inbound limit of `platform`.
    pub fn inbound_rate_for(&self, platform: hermes_types::model::Platform) -> RateLimit {
        self.file
            .ingest
            .rate_limits
            .get(platform.as_str())
            .copied()
            .unwrap_or(self.inbound_rate)
    }
}

/// A URL with its password replaced by `***`, safe to log.
pub fn mask_url(raw: &str) -> String {
    match Url::parse(raw) {
        Ok(mut u) => {
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            u.to_string()
        }
        Err(_) => "(unparseable URL)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn load(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(&move |k| map.get(k).cloned(), None)
    }

    #[test]
    fn defaults_point_at_local_servers() {
        let c = load(&[]).unwrap();
        assert_eq!(c.namespace.as_str(), "hermes");
        assert_eq!(c.http_addr.to_string(), "0.0.0.0:8080");
        assert_eq!(c.admin_addr.to_string(), "0.0.0.0:9090");
        assert_eq!(
            c.amqp_url.expose_secret(),
            "amqp://guest:guest@127.0.0.1:5672/%2f"
        );
        assert_eq!(c.redis_url.expose_secret(), "redis://127.0.0.1:6379");
        assert_eq!(c.log_format, LogFormat::Json);
        assert_eq!(c.llm_timeout, Duration::from_secs(45));
        assert_eq!(c.file.tiers[&Tier::Starter], vec!["claude-haiku", "ollama"]);
    }

    #[test]
    fn every_problem_is_reported_on_its_own_line() {
        let err = load(&[
            ("HERMES_NAMESPACE", "Bad Name"),
            ("HERMES_HTTP_ADDR", "nowhere"),
            ("HERMES_LOG_FORMAT", "xml"),
            ("API_SERVER_KEY", "k3y-x"),
            ("HERMES_PROVIDER", "telepathy"),
            ("AMQP_URL", "http://x"),
        ])
        .unwrap_err();
        assert_eq!(err.problems.len(), 6, "{err}");
        let text = err.to_string();
        assert!(text.contains("HERMES_NAMESPACE"));
        assert!(text.contains("HERMES_HTTP_ADDR"));
        assert!(text.contains("telepathy"));
        assert!(!text.contains("k3y-x"), "secret values never print: {text}");
    }

    #[test]
    fn the_webhook_allowlist_takes_hosts_and_ranges() {
        let c = load(&[(
            "HERMES_WEBHOOK_ALLOW",
            " agents.internal, 10.20.0.0/16 ,127.0.0.1",
        )])
        .unwrap();
        let shown: Vec<String> = c
            .delivery
            .webhook_allow
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, ["agents.internal", "10.20.0.0/16", "127.0.0.1/32"]);
        assert!(load(&[]).unwrap().delivery.webhook_allow.is_empty());
        let err = load(&[("HERMES_WEBHOOK_ALLOW", "10.0.0.1/8")]).unwrap_err();
        assert!(err.to_string().contains("HERMES_WEBHOOK_ALLOW"), "{err}");
    }

    #[test]
    fn ingest_needs_a_key_unless_on_loopback() {
        let c = load(&[]).unwrap();
        assert!(c.check_ingest().is_err());
        let c = load(&[("HERMES_HTTP_ADDR", "127.0.0.1:8080")]).unwrap();
        assert!(c.check_ingest().is_ok());
        let c = load(&[("API_SERVER_KEY", "0123456789abcdef")]).unwrap();
        assert!(c.check_ingest().is_ok());
    }

    #[test]
    fn provider_resolution_refuses_to_guess() {
        let c = load(&[]).unwrap();
        assert!(
            c.check_llm()
                .unwrap_err()
                .to_string()
                .contains("OPENAI_API_KEY")
        );
        let c = load(&[("HERMES_PROVIDER", "mock")]).unwrap();
        assert_eq!(c.provider.resolve(None).unwrap().kind, BackendKind::Mock);
        let c = load(&[("OPENAI_API_KEY", "sk-test")]).unwrap();
        assert_eq!(c.provider.resolve(None).unwrap().kind, BackendKind::Openai);
        let c = load(&[("HERMES_PROVIDER", "openai")]).unwrap();
        assert!(c.check_llm().is_err());
        let c = load(&[("HERMES_PROVIDER", "claude")]).unwrap_err();
        assert!(c.to_string().contains("HERMES_PROVIDER"), "{c}");
        // Key priority across the environment, and every base URL overridable.
        let c = load(&[
            ("OPENAI_API_KEY", "sk-o"),
            ("GEMINI_API_KEY", "g"),
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/anthropic"),
        ])
        .unwrap();
        assert_eq!(c.provider.resolve(None).unwrap().kind, BackendKind::Gemini);
        assert_eq!(
            c.provider.base_url(BackendKind::Anthropic).as_str(),
            "http://127.0.0.1:9/anthropic"
        );
        assert!(load(&[("GEMINI_BASE_URL", "ftp://x")]).is_err());
    }

    #[test]
    fn whatsapp_is_sent_through_the_configured_api() {
        let c = load(&[]).unwrap();
        assert!(c.delivery.configured().is_empty());
        let c = load(&[("D360_API_KEY", "k")]).unwrap();
        assert!(matches!(
            c.delivery.whatsapp,
            Some(WhatsappSender::Dialog360 { .. })
        ));
        let c = load(&[
            ("WHATSAPP_ACCESS_TOKEN", "t"),
            ("WHATSAPP_PHONE_NUMBER_ID", "123"),
        ])
        .unwrap();
        assert!(matches!(
            c.delivery.whatsapp,
            Some(WhatsappSender::Cloud { ref phone_number_id, .. }) if phone_number_id == "123"
        ));
        assert!(load(&[("WHATSAPP_ACCESS_TOKEN", "t")]).is_err());
        let both = [
            ("D360_API_KEY", "k"),
            ("WHATSAPP_ACCESS_TOKEN", "t"),
            ("WHATSAPP_PHONE_NUMBER_ID", "123"),
        ];
        assert!(load(&both).is_err());
        let mut chosen = both.to_vec();
        chosen.push(("WHATSAPP_SENDER", "cloud"));
        assert!(matches!(
            load(&chosen).unwrap().delivery.whatsapp,
            Some(WhatsappSender::Cloud { .. })
        ));
        let c = load(&[
            ("TELEGRAM_BOT_TOKEN", "123:abc"),
            ("INSTAGRAM_ACCESS_TOKEN", "x"),
        ])
        .unwrap();
        assert_eq!(c.delivery.configured(), ["telegram", "instagram"]);
        let text = format!("{:?}", c.describe());
        assert!(!text.contains("123:abc"));
    }

    #[test]
    fn retry_delays_are_whole_seconds() {
        let c = load(&[]).unwrap();
        let secs: Vec<u64> = c.bus.retry_delays.iter().map(|d| d.as_secs()).collect();
        assert_eq!(secs, [60, 300, 1500]);
        let c = load(&[("HERMES_DELIVERY_RETRY_DELAYS", "1, 2")]).unwrap();
        assert_eq!(c.bus.retry_delays.len(), 2);
        for bad in ["0", "1,x", "-5", "1,,2"] {
            assert!(
                load(&[("HERMES_DELIVERY_RETRY_DELAYS", bad)]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_global_budget_is_exact_money() {
        let c = load(&[("LLM_GLOBAL_DAILY_BUDGET_USD", "250.05")]).unwrap();
        assert_eq!(c.global_daily_budget_micro_usd, Some(250_050_000));
        assert!(load(&[("LLM_GLOBAL_DAILY_BUDGET_USD", "-1")]).is_err());
    }

    #[test]
    fn secrets_are_masked_in_descriptions_and_debug() {
        let c = load(&[
            ("DATABASE_URL", "postgres://app:hunter2@db:5432/hermes"),
            ("API_SERVER_KEY", "super-secret-key-123"),
            ("OPENAI_API_KEY", "sk-live-abcdef"),
        ])
        .unwrap();
        let text = format!("{:?}{:?}", c.describe(), c);
        for secret in ["hunter2", "super-secret-key-123", "sk-live-abcdef"] {
            assert!(!text.contains(secret), "{secret} leaked");
        }
        assert!(text.contains("postgres://app:***@db:5432/hermes"));
    }

    #[test]
    fn the_toml_file_is_validated() {
        let dir = std::env::temp_dir().join(format!("hermes-cfg-{}", uuid::Uuid::now_v7()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hermes.toml");
        std::fs::write(
            &path,
            "[tiers]\nfree=['tiny']\nstarter=['tiny']\npro=['nope']\nvenue-growth=['tiny']\n[models.tiny]\nid='t'\nmax_output_tokens=10\n[router]\nvision_model='tiny'\n",
        )
        .unwrap();
        let err = Config::from_lookup(&|_| None, Some(&path)).unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        assert!(err.problems[0].contains("\"nope\""));

        std::fs::write(&path, "[tiers]\ngold=['x']\n").unwrap();
        let err = Config::from_lookup(&|_| None, Some(&path)).unwrap_err();
        assert!(err.to_string().contains("gold"), "{err}");

        let err = Config::from_lookup(&|_| None, Some(&dir.join("missing.toml"))).unwrap_err();
        assert!(err.to_string().contains("cannot read config file"));
    }

    #[test]
    fn prices_are_exact_decimals_and_costs_round_half_up() {
        assert_eq!(Price::parse("0.80"), Ok(Price(800_000)));
        assert_eq!(Price::parse("15"), Ok(Price(15_000_000)));
        assert_eq!(Price::parse(".5"), Ok(Price(500_000)));
        for bad in ["", ".", "-1", "1e3", "0.1234567", "abc", "1.2.3"] {
            assert!(Price::parse(bad).is_err(), "{bad}");
        }
        let haiku = &FileConfig::default().models["claude-haiku"];
        // 20 input and 2 output tokens: 20 × $0.80 + 2 × $4.00 per million = 24 micro-dollars.
        assert_eq!(haiku.cost_micro_usd(20, 2), 24);
        assert_eq!(haiku.cost_micro_usd(1, 0), 1); // 0.8 rounds up
        assert_eq!(haiku.cost_micro_usd(1_000_000, 1_000_000), 4_800_000);
    }
}
