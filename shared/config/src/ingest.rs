//! Ingest's settings, one struct whatever the source: where it listens and with which key,
//! how long and how much it accepts, the front door against strangers, the API surface, the
//! channel webhook secrets that open each route, and the per-sender inbound rates (the
//! default from the environment, per platform from `[ingest.rate_limits]` in the TOML file).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use secrecy::SecretString;

use crate::{ApiSurface, ChannelSecrets, ConfigError, FrontDoor, RateLimit};

/// Everything ingest reads (`ctx.config.ingest`), set by `Config::from_lookup`.
#[derive(Clone, Debug)]
pub struct IngestSettings {
    /// `HERMES_HTTP_ADDR` (its host and port replaced by `API_SERVER_HOST` and
    /// `API_SERVER_PORT` when set): where the HTTP API and the webhooks listen.
    pub http_addr: SocketAddr,
    /// `API_SERVER_ENABLED`: whether the API's routes are served (otherwise only the
    /// webhooks and the MCP servers).
    pub api_enabled: bool,
    /// `API_SERVER_KEY`: the operator's Bearer key of the HTTP API.
    pub api_server_key: Option<SecretString>,
    /// `HERMES_RUN_TIMEOUT_SECS`: how long an API caller waits for its run's answer.
    pub run_timeout: Duration,
    /// `HERMES_MAX_BODY_BYTES`: the largest accepted request body.
    pub max_body_bytes: usize,
    /// The body limit of Meta's webhook routes (WhatsApp, 360dialog, Instagram).
    pub meta_max_body_bytes: usize,
    /// `HERMES_MAX_IN_FLIGHT`: HTTP requests handled at once.
    pub max_in_flight: usize,
    /// `HERMES_STREAMS_PER_KEY`: requests one key may hold open at once on one replica.
    pub streams_per_key: usize,
    /// `HERMES_STREAM_MAX_SECS`: the longest an event stream is held open.
    pub stream_max_lifetime: Duration,
    /// How long a client may leave written bytes untaken (`HERMES_HTTP_WRITE_TIMEOUT_SECS`).
    pub http_write_timeout: Duration,
    /// How long a client may take to send a request's headers (`HERMES_HTTP_HEADER_TIMEOUT_SECS`).
    pub http_header_timeout: Duration,
    /// How long a client may take to send a request's body (`HERMES_HTTP_BODY_TIMEOUT_SECS`).
    pub http_body_timeout: Duration,
    /// What a request whose caller is not known yet may hold (`HERMES_UNVERIFIED_*`, …).
    pub front_door: FrontDoor,
    /// CORS, the advertised model name and the image limits of the API surface.
    pub api: ApiSurface,
    /// The secrets that open and verify each channel's webhook route.
    pub webhooks: ChannelSecrets,
    /// Default per-sender inbound limit (`HERMES_INBOUND_PER_MINUTE`, `HERMES_INBOUND_BURST`).
    pub inbound_rate: RateLimit,
    /// `[ingest.rate_limits]`: per-sender inbound limits by platform name; platforms not
    /// named use `inbound_rate`.
    pub rate_limits: BTreeMap<String, RateLimit>,
    /// Per operator key: `messages_send` calls (docs/operator-mcp.md, limits).
    pub operator_sends: RateLimit,
    /// `HERMES_CONSOLE`: whether `/console` is served (docs/console.md).
    pub console: bool,
    /// `HERMES_CONSOLE_SESSION_SECS`: how long a console login lasts.
    pub console_session: Duration,
}

impl IngestSettings {
    /// What ingest needs beyond the common settings: a strong key unless bound to loopback.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.check_at(self.http_addr)
    }

    /// [`IngestSettings::check`] for a listener already bound to `addr` (which may not be
    /// `HERMES_HTTP_ADDR`): without `API_SERVER_KEY`, only a loopback address is served.
    pub fn check_at(&self, addr: SocketAddr) -> Result<(), ConfigError> {
        if self.api_server_key.is_none() && !addr.ip().is_loopback() {
            return Err(ConfigError {
                problems: vec![format!(
                    "API_SERVER_KEY is required when ingest listens on {addr} (not loopback)"
                )],
            });
        }
        Ok(())
    }

    /// The per-sender inbound limit of `platform`.
    pub fn inbound_rate_for(&self, platform: hermes_types::model::Platform) -> RateLimit {
        self.rate_limits
            .get(platform.as_str())
            .copied()
            .unwrap_or(self.inbound_rate)
    }
}
