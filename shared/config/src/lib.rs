//! Configuration, read once at start from the environment and an optional TOML file
//! (`docs/configuration.md`), validated into typed structs. Every problem is reported on its
//! own line; secrets are wrapped so they never print.
//!
//! Each environment variable is declared once, in [`env`](mod@env); the reader, `hermes doctor`'s
//! listing, `hermes --help` and the reference table in `docs/configuration.md` derive from
//! that declaration.
//!
//! Each service reads one struct of [`Config`], whatever the source of a setting:
//! `ingest`, `router`, `llm`, `tools`, `delivery`. What several services read stays at the
//! top (`docs/development.md`, "Settings: one struct per service").

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use hermes_types::model::Tier;

use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

mod channels;
mod delivery;
mod describe;
mod discord_gateway;
mod dispatcher;
pub mod env;
mod file;
mod forge;
mod front_door;
mod ingest;
mod llm;
mod load;
mod mcp;
mod models;
mod proxy;
mod router;
mod sms;
mod teams;
mod tools;
mod traces;

pub use channels::{
    ChannelsSettings, EditPolicy, GroupAnswer, GroupSettings, Piece, SlackChannelReplies,
    SlackSettings, TelegramSettings, TemplateSpec, TemplateText, WhatsappFile,
};
pub use channels::{MAX_SEGMENTS, MessageTag, MessengerSettings, SmsSettings};
pub use delivery::{
    AlertSettings, BreakerSettings, DeliverySettings, DiscordSender, InstagramSender,
    RateGateSettings, SlackSender, TelegramSender, WhatsappSender,
};
pub use discord_gateway::{DiscordGatewaySettings, GatewayCompression};
pub use dispatcher::{
    DispatcherSettings, JwtAlg, JwtKey, MAX_JWT_LEEWAY, McpJwtSettings, PausedAssignments,
};
pub use file::{ApiSettings, FileConfig, ModelSpec, Price};
pub use forge::{ForgeBudget, ForgeSettings};
pub use front_door::FrontDoor;
pub use ingest::IngestSettings;
pub use models::{ModelChoiceError, resolve_model};
pub use proxy::ProxySettings;
pub use sms::{MessengerSender, MessengerWebhook, SmsSender, TwilioFrom, TwilioWebhook};
pub use teams::{KeySource, TeamsSender, TeamsWebhook};

pub use llm::{
    BackendKind, CacheSettings, LlmSettings, ProviderSettings, Resolved, TierBudget,
    WorkspaceSecrets,
};

pub use router::{
    BurstSettings, PersonaSettings, RecallSettings, RouterSettings, ToolGateSettings, VisionIntent,
    VisionIntents, VisionSettings,
};

pub use mcp::{
    AuditLevel, McpSamplingSettings, McpServerSettings, McpToolFilter, McpTransportKind,
    local_host_toolsets, mcp_toolset,
};
pub use tools::{AllowRule, ApprovalSettings, Cidr, HttpFetchSettings, ToolsSettings};
pub use traces::{OtlpExport, OtlpProtocol, Sampler, TraceSettings, pairs};

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
    /// How long the outbox marker gathers published rows before one statement marks them.
    pub mark_gather: Duration,
    pub delivery_limit: u32,
    pub publish_window: usize,
    /// Largest AMQP frame asked of the broker, unless the URL sets one.
    pub frame_max: u32,
    pub reconnect_timeout: Duration,
    pub queue_expires: Option<Duration>,
    /// Waits before each queued retry of the stages that retry later (delivery, webhooks);
    /// after the last one a failing message is parked.
    pub retry_delays: Vec<Duration>,
    /// How long a chat message over its sender's inbound rate waits before it is routed
    /// (the router's one wait queue, its slow lane).
    pub inbound_delay: Duration,
    /// Bound of one publish, the broker's confirm included.
    pub publish_timeout: Duration,
    /// Most messages one retry wait queue holds.
    pub wait_queue_max_length: u32,
}

impl BusSettings {
    /// The delays of `stage`'s wait queues (one queue per delay).
    pub fn wait_delays(&self, stage: hermes_types::stage::Stage) -> Vec<Duration> {
        use hermes_types::stage::Stage;
        match stage {
            Stage::Delivery | Stage::Webhooks => self.retry_delays.clone(),
            Stage::Router => vec![self.inbound_delay],
            Stage::Llm | Stage::Tools => Vec::new(),
        }
    }
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
    pub slack_signing_secret: Option<SecretString>,
    /// The Discord application's public key, 64 hex digits (`/webhooks/discord`).
    pub discord_public_key: Option<String>,
    /// Twilio's auth token and the public URL it signs (`POST /webhooks/twilio`).
    pub twilio: TwilioWebhook,
    /// Messenger's app secret and verify token (`/webhooks/messenger`).
    pub messenger: MessengerWebhook,
    /// Teams' app id and signing keys (`/webhooks/teams`).
    pub teams: TeamsWebhook,
}

/// A token bucket: `burst` at once, refilled at `per_minute`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub per_minute: u32,
    pub burst: u32,
}

/// The OpenAI-compatible API surface's environment settings (`docs/api.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiSurface {
    /// `API_SERVER_CORS_ORIGINS`: exact origins a browser may call from; empty: CORS off.
    pub cors_origins: Vec<String>,
    /// The advertised model name: `API_SERVER_MODEL_NAME`, else `[api] model_name`.
    pub model_name: String,
    /// `HERMES_IMAGE_MAX_BYTES`: the largest image a caller may send.
    pub image_max_bytes: usize,
    /// `HERMES_IMAGE_FETCH_ALLOW`: non-public hosts an image URL may reach.
    pub image_fetch_allow: Vec<AllowRule>,
    /// `HERMES_IMAGE_MAX_COUNT`: the most images one API request may carry.
    pub image_max_count: usize,
    /// `HERMES_IMAGE_INLINE_MAX_BYTES`: the most image bytes inlined into one model call.
    pub image_inline_max_bytes: usize,
    /// `HERMES_IMAGE_FETCH_DEADLINE_SECS`: the whole fetch of one model call's images.
    pub image_fetch_deadline: Duration,
}

/// Media from chat platforms and their transcription (docs/channels.md, media).
#[derive(Clone, Debug)]
pub struct MediaSettings {
    /// `HERMES_MEDIA_DEADLINE_SECS`: the whole fetch of one platform file.
    pub deadline: Duration,
    /// `HERMES_AUDIO_MAX_BYTES`: the largest voice note or audio file downloaded.
    pub audio_max_bytes: usize,
    /// `HERMES_MEDIA_FETCH_ALLOW`: non-public hosts a platform download may reach.
    pub fetch_allow: Vec<AllowRule>,
    /// The transcription endpoint; `None`: voice notes are not listened to.
    pub transcribe: Option<TranscribeSettings>,
}

/// An OpenAI-compatible `POST {url}/audio/transcriptions` endpoint.
#[derive(Clone, Debug)]
pub struct TranscribeSettings {
    pub url: Url,
    pub key: Option<SecretString>,
    pub model: String,
    pub timeout: Duration,
}

/// Days each family of tables keeps its rows; 0 keeps them for ever (`docs/security.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Closed `agent_runs`, `activity_events`, finished `webhook_deliveries`.
    pub runs_days: u32,
    /// `interactions` and idle `sessions`.
    pub conversations_days: u32,
    /// `message_statuses`.
    pub statuses_days: u32,
    /// Extracted facts in `user_memory`.
    pub facts_days: u32,
    /// Itemized `credit_ledger` rows (older ones are summarised).
    pub ledger_days: u32,
    /// Responses of the Responses API (`responses`); their runs stay as long.
    pub responses_days: u32,
    /// Forge delivery ids taken (`forge_deliveries`): how long a replayed wake is known.
    pub forge_deliveries_days: u32,
    /// How often a router sweeps.
    pub sweep_every: Duration,
}

/// What one tenant may hold (docs/security.md, "Keys and tenants").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TenantLimits {
    /// `HERMES_JOBS_PER_KEY`: most scheduled jobs one API key holds.
    pub jobs_per_key: u32,
    /// `HERMES_JOB_MIN_INTERVAL_SECS`: shortest time between two runs of one job.
    pub job_min_interval: Duration,
    /// `HERMES_AGENT_FACTS_PER_USER`: most facts agents remember about one user.
    pub agent_facts_per_user: u32,
}

/// The whole effective configuration of a process: one struct per service (`ingest`,
/// `router`, `llm`, `tools`, `delivery`), and the settings several services share.
#[derive(Clone, Debug)]
pub struct Config {
    pub database_url: SecretString,
    pub amqp_url: SecretString,
    pub redis_url: SecretString,
    /// `HERMES_CACHE_KEY_SECRET`: keys the hash of identifiers in Redis key names.
    pub cache_key_secret: Option<SecretString>,
    pub namespace: Namespace,
    pub admin_addr: SocketAddr,
    pub log_format: LogFormat,
    /// How long a run's event stream is kept after its last event (`HERMES_RUN_EVENTS_TTL_SECS`).
    pub run_events_ttl: Duration,
    /// The bytes one run's event stream may hold (`HERMES_RUN_EVENTS_MAX_BYTES`).
    pub run_events_max_bytes: usize,
    pub shutdown_grace: Duration,
    pub db_pool_size: usize,
    /// `statement_timeout` of the services' pooled connections.
    pub db_statement_timeout: Duration,
    /// `idle_in_transaction_session_timeout` of the services' pooled connections.
    pub db_idle_in_tx_timeout: Duration,
    pub bus: BusSettings,
    /// The Forge wake route (`HERMES_FORGE_*`).
    pub forge: ForgeSettings,
    /// The Forge contract's dispatcher side: paused assignments, JWT bearers
    /// (`HERMES_AGENT_PAUSED_ASSIGNMENTS`, `HERMES_MCP_JWT_*`).
    pub dispatcher: DispatcherSettings,
    /// Everything ingest reads, from the environment and `[ingest]`.
    pub ingest: IngestSettings,
    /// Everything the router reads, from the environment and `[router]`.
    pub router: RouterSettings,
    /// Everything the llm stage reads, from the environment and `[llm]`.
    pub llm: LlmSettings,
    /// Everything the tools stage reads, from the environment and `[tools]`.
    pub tools: ToolsSettings,
    /// Platform media downloads and voice transcription.
    pub media: MediaSettings,
    /// Everything the delivery stage reads: channel senders, send retries, breaker and
    /// rate gate.
    pub delivery: DeliverySettings,
    /// The Discord Gateway connector (`DISCORD_GATEWAY_URL`, `DISCORD_SHARD_*`).
    pub discord_gateway: DiscordGatewaySettings,
    /// Where ops alerts go.
    pub alerts: AlertSettings,
    /// What one tenant (a key, its agents) may hold.
    pub tenants: TenantLimits,
    /// Traces over OTLP (`OTEL_*`, `HERMES_TRACE_*`; docs/tracing.md).
    pub traces: TraceSettings,
    /// Proxy mode (`GATEWAY_PROXY_*`; docs/api.md, "Proxy mode"): set, the router forwards
    /// every message upstream instead of routing it.
    pub proxy: Option<ProxySettings>,
    /// `[tiers]`: tier → ordered logical model names (the failover chain).
    pub tiers: BTreeMap<Tier, Vec<String>>,
    /// `[models]`: logical model name → provider model id, limits and prices.
    pub models: BTreeMap<String, ModelSpec>,
    /// `[api]`: the tier, core prompt and advertised name of the API surface (the router
    /// answers with the first two; `ingest.api.model_name` is the name in effect).
    pub api: ApiSettings,
    /// `[channels]`: how the chat channels behave (ingest's webhooks, delivery's senders).
    pub channels: ChannelsSettings,
    /// `[mcp_servers]`: the MCP servers by name (the tools stage runs them, the router
    /// offers their toolsets).
    pub mcp_servers: BTreeMap<String, McpServerSettings>,
    pub config_path: Option<PathBuf>,
    /// What each variable resolved to when read, secrets masked (for [`Config::describe`]).
    shown: BTreeMap<&'static str, String>,
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

impl Config {
    /// What the llm stage needs: a usable provider.
    pub fn check_llm(&self) -> Result<(), ConfigError> {
        self.llm
            .provider
            .resolve(None)
            .map(|_| ())
            .map_err(|e| ConfigError { problems: vec![e] })
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
mod tests;
