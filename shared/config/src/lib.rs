//! Configuration, read once at start from the environment and an optional TOML file
//! (`docs/configuration.md`), validated into typed structs. Every problem is reported on its
//! own line; secrets are wrapped so they never print.
//!
//! Each environment variable is declared once, in [`env`]; the reader, `hermes doctor`'s
//! listing, `hermes --help` and the reference table in `docs/configuration.md` derive from
//! that declaration.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;
use url::Url;

mod channels;
mod delivery;
mod describe;
pub mod env;
mod file;
mod forge;
mod front_door;
mod llm;
mod load;
mod mcp;
mod router;
mod tools;

pub use channels::{
    ChannelsSettings, EditPolicy, GroupAnswer, GroupSettings, Piece, TelegramSettings,
    TemplateSpec, TemplateText, WhatsappFile,
};
pub use delivery::{
    AlertSettings, BreakerSettings, DeliverySettings, InstagramSender, RateGateSettings,
    TelegramSender, WhatsappSender,
};
pub use file::{ApiSettings, FileConfig, IngestSettings, ModelSpec, Price};
pub use forge::{ForgeBudget, ForgeSettings};
pub use front_door::FrontDoor;

pub use llm::{
    BackendKind, CacheSettings, LlmSettings, ProviderSettings, Resolved, TierBudget,
    WorkspaceSecrets,
};

pub use router::{
    PersonaSettings, RecallSettings, RouterSecrets, RouterSettings, ToolGateSettings, VisionIntent,
    VisionIntents, VisionSettings,
};

pub use mcp::{
    AuditLevel, McpSamplingSettings, McpServerSettings, McpToolFilter, McpTransportKind,
    local_host_toolsets, mcp_toolset,
};
pub use tools::{AllowRule, Cidr, HttpFetchSettings, ToolsSettings};

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

/// Tool calls that wait for an operator (docs/operator-mcp.md, approvals).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalSettings {
    /// How long a call waits before it is denied as timed out (`HERMES_APPROVAL_TIMEOUT`).
    pub timeout: Duration,
    /// How often the tools service times out calls and updates the gauges.
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

/// Bursts (`HERMES_BURST_QUIET_MS`, `HERMES_BURST_MAX_WAIT_MS`, docs/channels.md): a chat
/// message is held until its conversation has been quiet for `quiet`, or its first held
/// message has waited `max_wait`, then the held messages are routed as one turn. A `quiet`
/// of 0 is off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BurstSettings {
    pub quiet: Duration,
    pub max_wait: Duration,
}

impl BurstSettings {
    /// Whether chat messages are held at all.
    pub fn on(&self) -> bool {
        !self.quiet.is_zero()
    }
}

/// The whole effective configuration of a process.
#[derive(Clone, Debug)]
pub struct Config {
    pub database_url: SecretString,
    pub amqp_url: SecretString,
    pub redis_url: SecretString,
    /// `HERMES_CACHE_KEY_SECRET`: keys the hash of identifiers in Redis key names.
    pub cache_key_secret: Option<SecretString>,
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
    /// How long a run's event stream is kept after its last event (`HERMES_RUN_EVENTS_TTL_SECS`).
    pub run_events_ttl: Duration,
    /// The bytes one run's event stream may hold (`HERMES_RUN_EVENTS_MAX_BYTES`).
    pub run_events_max_bytes: usize,
    pub max_body_bytes: usize,
    /// The body limit of Meta's webhook routes (WhatsApp, 360dialog, Instagram).
    pub meta_max_body_bytes: usize,
    pub max_in_flight: usize,
    /// `HERMES_STREAMS_PER_KEY`: requests one key may hold open at once on one replica.
    pub streams_per_key: usize,
    /// `HERMES_STREAM_MAX_SECS`: the longest an event stream is held open.
    pub stream_max_lifetime: Duration,
    /// How long a client may leave written bytes untaken (`HERMES_HTTP_WRITE_TIMEOUT_SECS`).
    pub http_write_timeout: Duration,
    /// What a request whose caller is not known yet may hold (`HERMES_UNVERIFIED_*`, …).
    pub front_door: FrontDoor,
    /// CORS, the advertised model name and the image limit of the API surface.
    pub api: ApiSurface,
    /// How long a client may take to send a request's headers (`HERMES_HTTP_HEADER_TIMEOUT_SECS`).
    pub http_header_timeout: Duration,
    /// How long a client may take to send a request's body (`HERMES_HTTP_BODY_TIMEOUT_SECS`).
    pub http_body_timeout: Duration,
    pub shutdown_grace: Duration,
    pub db_pool_size: usize,
    /// How long a run may stay open before the router's sweeper ends it.
    pub run_stuck_after: Duration,
    /// Delays of the re-wakes of an unacknowledged external run, each after the previous wake.
    pub agent_rewake_delays: Vec<Duration>,
    /// How long an external agent may be silent (no 2xx, no heartbeat) before it is OFFLINE.
    pub agent_presence: Duration,
    /// Bursts of chat messages answered as one turn (docs/channels.md, bursts).
    pub bursts: BurstSettings,
    /// `statement_timeout` of the services' pooled connections.
    pub db_statement_timeout: Duration,
    /// `idle_in_transaction_session_timeout` of the services' pooled connections.
    pub db_idle_in_tx_timeout: Duration,
    pub bus: BusSettings,
    pub channels: ChannelSecrets,
    /// The Forge wake route (`HERMES_FORGE_*`).
    pub forge: ForgeSettings,
    /// Default per-sender inbound limit (platforms may override in the file).
    pub inbound_rate: RateLimit,
    /// Per operator key: `messages_send` calls (docs/operator-mcp.md, limits).
    pub operator_sends: RateLimit,
    pub router: RouterSecrets,
    /// Platform media downloads and voice transcription.
    pub media: MediaSettings,
    /// Channel senders, send retries, breaker and rate gate of the delivery stage.
    pub delivery: DeliverySettings,
    /// How long each family of tables keeps its rows (`HERMES_RETENTION_*`).
    pub retention: Retention,
    /// Where ops alerts go.
    pub alerts: AlertSettings,
    /// Tool calls waiting for an operator.
    pub approvals: ApprovalSettings,
    /// How long the tools stage's readiness waits for its MCP servers' first discovery
    /// (`HERMES_TOOLS_READY_TIMEOUT`).
    pub tools_ready_timeout: Duration,
    /// What one tenant (a key, its agents) may hold.
    pub tenants: TenantLimits,
    pub file: FileConfig,
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
    /// What ingest needs beyond the common settings: a strong key unless bound to loopback.
    pub fn check_ingest(&self) -> Result<(), ConfigError> {
        self.check_ingest_at(self.http_addr)
    }

    /// [`Config::check_ingest`] for a listener already bound to `addr` (which may not be
    /// `HERMES_HTTP_ADDR`): without `API_SERVER_KEY`, only a loopback address is served.
    pub fn check_ingest_at(&self, addr: SocketAddr) -> Result<(), ConfigError> {
        if self.api_server_key.is_none() && !addr.ip().is_loopback() {
            return Err(ConfigError {
                problems: vec![format!(
                    "API_SERVER_KEY is required when ingest listens on {addr} (not loopback)"
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
mod tests;
