//! Assembling a [`Config`] from the declared environment variables and the TOML file. Every
//! variable is read (so every problem is found) before any is required; a configuration
//! with a problem is refused as a whole (`docs/architecture.md#6-fail-loud-at-start-degrade-at-run-time`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::env::{
    Reader, api, approvals, bus, ingest, media, process, providers, retention, router, tenants,
    tools,
};
use crate::{
    ApiSurface, ApprovalSettings, BackendKind, BurstSettings, BusSettings, ChannelSecrets, Config,
    ConfigError, FileConfig, IngestSettings, LlmSettings, MediaSettings, ProviderSettings,
    RateLimit, Retention, RouterSettings, TenantLimits, ToolsSettings, TranscribeSettings,
};

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
        let mut r = Reader::new(env);

        let database_url = r.get(&process::DATABASE_URL);
        let amqp_url = r.get(&process::AMQP_URL);
        let redis_url = r.get(&process::REDIS_URL);
        let cache_key_secret = r.get(&process::HERMES_CACHE_KEY_SECRET);
        let namespace = r.get(&process::HERMES_NAMESPACE);
        // The document's host and port name parts of the one listener's address.
        let http_addr = r.get(&process::HERMES_HTTP_ADDR).map(|mut addr| {
            if let Some(host) = r.get(&api::API_SERVER_HOST) {
                addr.set_ip(host);
            }
            if let Some(port) = r.get(&api::API_SERVER_PORT) {
                addr.set_port(port);
            }
            addr
        });
        let api_enabled = r.get(&api::API_SERVER_ENABLED);
        let console = r.get(&crate::env::console::HERMES_CONSOLE);
        let console_session = r.get(&crate::env::console::HERMES_CONSOLE_SESSION_SECS);
        let admin_addr = r.get(&process::HERMES_ADMIN_ADDR);
        let log_format = r.get(&process::HERMES_LOG_FORMAT);
        let shutdown_grace = r.get(&process::HERMES_SHUTDOWN_GRACE_SECS);
        let db_pool_size = r.get(&process::HERMES_DB_POOL_SIZE);
        let run_stuck_after = r.get(&router::HERMES_RUN_STUCK_AFTER_SECS);
        let agent_rewake_delays = r.get(&router::HERMES_AGENT_REWAKE_DELAYS);
        let agent_presence = r.get(&router::HERMES_AGENT_PRESENCE_SECS);
        let burst_quiet = r.get(&router::HERMES_BURST_QUIET_MS);
        let burst_max_wait = r.get(&router::HERMES_BURST_MAX_WAIT_MS);
        let dreaming = crate::router::read_dreaming(&mut r);
        let db_statement_timeout = r.get(&process::HERMES_DB_STATEMENT_TIMEOUT_SECS);
        let db_idle_in_tx_timeout = r.get(&process::HERMES_DB_IDLE_IN_TX_TIMEOUT_SECS);
        let api_server_key = r.get(&ingest::API_SERVER_KEY);
        let run_timeout = r.get(&ingest::HERMES_RUN_TIMEOUT_SECS);
        let run_events_ttl = r.get(&ingest::HERMES_RUN_EVENTS_TTL_SECS);
        let run_events_max_bytes = r.get(&ingest::HERMES_RUN_EVENTS_MAX_BYTES);
        let max_body_bytes = r.get(&ingest::HERMES_MAX_BODY_BYTES);
        let meta_max_body_bytes = r.get(&ingest::HERMES_META_MAX_BODY_BYTES);
        let max_in_flight = r.get(&ingest::HERMES_MAX_IN_FLIGHT);
        let front_door = crate::front_door::read_front_door(&mut r);
        let http_header_timeout = r.get(&ingest::HERMES_HTTP_HEADER_TIMEOUT_SECS);
        let http_body_timeout = r.get(&ingest::HERMES_HTTP_BODY_TIMEOUT_SECS);
        let cors_origins = r.get(&api::API_SERVER_CORS_ORIGINS).unwrap_or_default();
        let model_name = r.get(&api::API_SERVER_MODEL_NAME);
        let image_max_bytes = r.get(&api::HERMES_IMAGE_MAX_BYTES);
        let image_fetch_allow = r.get(&api::HERMES_IMAGE_FETCH_ALLOW).unwrap_or_default();
        let image_max_count = r.get(&api::HERMES_IMAGE_MAX_COUNT);
        let image_inline_max_bytes = r.get(&api::HERMES_IMAGE_INLINE_MAX_BYTES);
        let image_fetch_deadline = r.get(&api::HERMES_IMAGE_FETCH_DEADLINE_SECS);
        let streams_per_key = r.get(&ingest::HERMES_STREAMS_PER_KEY);
        let stream_max_lifetime = r.get(&ingest::HERMES_STREAM_MAX_SECS);
        let http_write_timeout = r.get(&ingest::HERMES_HTTP_WRITE_TIMEOUT_SECS);
        let provider = read_provider(&mut r);
        let global_daily_budget_micro_usd = r.get(&providers::LLM_GLOBAL_DAILY_BUDGET_USD);
        let llm_timeout = r.get(&providers::HERMES_LLM_TIMEOUT_SECS);
        let bus = read_bus(&mut r);
        let channels = read_channels(&mut r);
        let forge = crate::forge::read_forge(&mut r);
        let dispatcher = crate::dispatcher::read_dispatcher(&mut r);
        let inbound_per_minute = r.get(&ingest::HERMES_INBOUND_PER_MINUTE);
        let inbound_burst = r.get(&ingest::HERMES_INBOUND_BURST);
        let operator_sends = r.get(&ingest::HERMES_OPERATOR_SENDS_PER_MINUTE);
        let embeddings_url = r.get(&router::HERMES_EMBEDDINGS_URL);
        let embeddings_api_key = r.get(&router::HERMES_EMBEDDINGS_API_KEY);
        let session_keys = r.get(&router::HERMES_SESSION_KEYS).unwrap_or_default();
        let secret_keys = r.get(&router::HERMES_SECRET_KEYS).unwrap_or_default();
        let media = read_media(&mut r);
        let retention = read_retention(&mut r);
        let delivery = crate::delivery::read_delivery(&mut r);
        let alerts = crate::delivery::read_alerts(&mut r);
        let discord_gateway = crate::discord_gateway::read_discord_gateway(&mut r);
        let approval_timeout = r.get(&approvals::HERMES_APPROVAL_TIMEOUT);
        let approval_sweep = r.get(&approvals::HERMES_APPROVAL_SWEEP_SECS);
        let tools_ready_timeout = r.get(&tools::HERMES_TOOLS_READY_TIMEOUT);
        let jobs_per_key = r.get(&tenants::HERMES_JOBS_PER_KEY);
        let job_min_interval = r.get(&tenants::HERMES_JOB_MIN_INTERVAL_SECS);
        let agent_facts_per_user = r.get(&tenants::HERMES_AGENT_FACTS_PER_USER);
        let traces = crate::traces::read_traces(&mut r);
        let proxy = crate::proxy::read_proxy(&mut r);

        // `--config` wins over the variable; doctor shows whichever was used.
        let from_env = r.get(&process::HERMES_CONFIG);
        let config_path = config_path.map(Path::to_path_buf).or(from_env);
        if let Some(path) = &config_path {
            r.show_as(&process::HERMES_CONFIG, path.display().to_string());
        }
        // Each section goes to the settings of the service that reads it; the sections
        // several services read stay at the top.
        let FileConfig {
            tiers,
            models,
            api: api_file,
            ingest: ingest_file,
            channels: channels_file,
            router: router_file,
            llm: llm_file,
            tools: tools_file,
            mcp_servers,
        } = read_file(config_path.as_deref(), &mut r.problems);
        // The variable is an alias of the file's key and wins over it.
        let model_name = model_name.unwrap_or_else(|| api_file.model_name.clone());

        // Every `?` below only meets a `None` that left a problem behind.
        let config = (|| {
            Some(Config {
                database_url: database_url?,
                amqp_url: amqp_url?,
                redis_url: redis_url?,
                cache_key_secret,
                namespace: namespace?,
                admin_addr: admin_addr?,
                log_format: log_format?,
                run_events_ttl: run_events_ttl?,
                run_events_max_bytes: run_events_max_bytes?,
                shutdown_grace: shutdown_grace?,
                db_pool_size: db_pool_size?,
                db_statement_timeout: db_statement_timeout?,
                db_idle_in_tx_timeout: db_idle_in_tx_timeout?,
                bus: bus?,
                forge: forge?,
                dispatcher: dispatcher?,
                ingest: IngestSettings {
                    http_addr: http_addr?,
                    api_enabled: api_enabled?,
                    console: console?,
                    console_session: console_session?,
                    api_server_key,
                    run_timeout: run_timeout?,
                    max_body_bytes: max_body_bytes?,
                    meta_max_body_bytes: meta_max_body_bytes?,
                    max_in_flight: max_in_flight?,
                    streams_per_key: streams_per_key?,
                    stream_max_lifetime: stream_max_lifetime?,
                    http_write_timeout: http_write_timeout?,
                    http_header_timeout: http_header_timeout?,
                    http_body_timeout: http_body_timeout?,
                    front_door: front_door?,
                    api: ApiSurface {
                        cors_origins,
                        model_name,
                        image_max_bytes: image_max_bytes?,
                        image_fetch_allow,
                        image_max_count: image_max_count?,
                        image_inline_max_bytes: image_inline_max_bytes?,
                        image_fetch_deadline: image_fetch_deadline?,
                    },
                    webhooks: channels?,
                    inbound_rate: RateLimit {
                        per_minute: inbound_per_minute?,
                        burst: inbound_burst?,
                    },
                    rate_limits: ingest_file.rate_limits,
                    operator_sends: RateLimit {
                        per_minute: operator_sends?,
                        burst: operator_sends?,
                    },
                },
                router: RouterSettings {
                    embeddings_url,
                    embeddings_api_key,
                    session_keys,
                    secret_keys,
                    run_stuck_after: run_stuck_after?,
                    agent_rewake_delays: agent_rewake_delays?,
                    agent_presence: agent_presence?,
                    bursts: BurstSettings {
                        quiet: burst_quiet?,
                        max_wait: burst_max_wait?,
                    },
                    dreaming: dreaming?,
                    retention: retention?,
                    ..router_file
                },
                llm: LlmSettings {
                    provider: provider?,
                    global_daily_budget_micro_usd,
                    call_timeout: llm_timeout?,
                    ..llm_file
                },
                tools: ToolsSettings {
                    ready_timeout: tools_ready_timeout?,
                    approvals: ApprovalSettings {
                        timeout: approval_timeout?,
                        sweep_every: approval_sweep?,
                    },
                    ..tools_file
                },
                media: media?,
                delivery: delivery?,
                discord_gateway: discord_gateway?,
                traces: traces?,
                proxy,
                alerts: alerts?,
                tenants: TenantLimits {
                    jobs_per_key: jobs_per_key?,
                    job_min_interval: job_min_interval?,
                    agent_facts_per_user: agent_facts_per_user?,
                },
                tiers,
                models,
                api: api_file,
                channels: channels_file,
                mcp_servers,
                config_path,
                shown: std::mem::take(&mut r.shown),
            })
        })();
        match config {
            Some(config) if r.problems.is_empty() => Ok(config),
            _ => Err(ConfigError {
                problems: r.problems,
            }),
        }
    }
}

/// The forced backend, the model override, and every backend's key and base URL.
fn read_provider(r: &mut Reader<'_>) -> Option<ProviderSettings> {
    let forced = r.get(&providers::HERMES_PROVIDER);
    let model_override = r.get(&providers::HERMES_MODEL);
    let mut keys = BTreeMap::new();
    let mut base_urls = BTreeMap::new();
    for kind in BackendKind::ALL {
        let (key_var, base_url_var) = providers::backend_vars(kind);
        if let Some(key) = key_var.and_then(|var| r.get(var)) {
            keys.insert(kind, key);
        }
        // An invalid base URL leaves its problem; the configuration is refused for it.
        if let Some(url) = base_url_var.and_then(|var| r.get(var)) {
            base_urls.insert(kind, url);
        }
    }
    let anthropic_version = r.get(&providers::ANTHROPIC_VERSION);
    Some(ProviderSettings {
        forced,
        model_override,
        keys,
        base_urls,
        anthropic_version: anthropic_version?,
    })
}

/// Platform media limits and the transcription endpoint (off without its URL).
fn read_media(r: &mut Reader<'_>) -> Option<MediaSettings> {
    let deadline = r.get(&media::HERMES_MEDIA_DEADLINE_SECS);
    let audio_max_bytes = r.get(&media::HERMES_AUDIO_MAX_BYTES);
    let fetch_allow = r.get(&media::HERMES_MEDIA_FETCH_ALLOW).unwrap_or_default();
    let url = r.get(&media::HERMES_TRANSCRIBE_URL);
    let key = r.get(&media::HERMES_TRANSCRIBE_KEY);
    let model = r.get(&media::HERMES_TRANSCRIBE_MODEL);
    let timeout = r.get(&media::HERMES_TRANSCRIBE_TIMEOUT_SECS);
    let transcribe = match url {
        Some(url) => Some(TranscribeSettings {
            url,
            key,
            model: model?,
            timeout: timeout?,
        }),
        None => None,
    };
    Some(MediaSettings {
        deadline: deadline?,
        audio_max_bytes: audio_max_bytes?,
        fetch_allow,
        transcribe,
    })
}

fn read_retention(r: &mut Reader<'_>) -> Option<Retention> {
    let runs = r.get(&retention::HERMES_RETENTION_RUNS_DAYS);
    let conversations = r.get(&retention::HERMES_RETENTION_CONVERSATIONS_DAYS);
    let statuses = r.get(&retention::HERMES_RETENTION_STATUSES_DAYS);
    let facts = r.get(&retention::HERMES_RETENTION_FACTS_DAYS);
    let ledger = r.get(&retention::HERMES_RETENTION_LEDGER_DAYS);
    let responses = r.get(&retention::HERMES_RETENTION_RESPONSES_DAYS);
    let forge_deliveries = r.get(&retention::HERMES_RETENTION_FORGE_DELIVERIES_DAYS);
    let sweep_every = r.get(&retention::HERMES_RETENTION_SWEEP_SECS);
    Some(Retention {
        runs_days: runs?,
        conversations_days: conversations?,
        statuses_days: statuses?,
        facts_days: facts?,
        ledger_days: ledger?,
        responses_days: responses?,
        forge_deliveries_days: forge_deliveries?,
        sweep_every: sweep_every?,
    })
}

fn read_bus(r: &mut Reader<'_>) -> Option<BusSettings> {
    let prefetch = r.get(&bus::HERMES_PREFETCH);
    let commit_group = r.get(&bus::HERMES_COMMIT_GROUP);
    let mark_gather = r.get(&bus::HERMES_OUTBOX_MARK_GATHER_MS);
    let delivery_limit = r.get(&bus::HERMES_DELIVERY_LIMIT);
    let publish_window = r.get(&bus::HERMES_PUBLISH_WINDOW);
    let frame_max = r.get(&bus::HERMES_AMQP_FRAME_MAX);
    let reconnect_timeout = r.get(&bus::HERMES_BUS_RECONNECT_SECS);
    let queue_expires = r.get(&bus::HERMES_QUEUE_EXPIRES_SECS);
    let retry_delays = r.get(&bus::HERMES_DELIVERY_RETRY_DELAYS);
    let inbound_delay = r.get(&bus::HERMES_INBOUND_DELAY_SECS);
    let publish_timeout = r.get(&bus::HERMES_PUBLISH_TIMEOUT_SECS);
    let wait_queue_max_length = r.get(&bus::HERMES_WAIT_QUEUE_MAX_LENGTH);
    Some(BusSettings {
        prefetch: prefetch?,
        commit_group: commit_group?,
        mark_gather: mark_gather?,
        delivery_limit: delivery_limit?,
        publish_window: publish_window?,
        frame_max: frame_max?,
        reconnect_timeout: reconnect_timeout?,
        queue_expires,
        retry_delays: retry_delays?,
        inbound_delay: inbound_delay?,
        publish_timeout: publish_timeout?,
        wait_queue_max_length: wait_queue_max_length?,
    })
}

fn read_channels(r: &mut Reader<'_>) -> Option<ChannelSecrets> {
    let telegram_webhook_secret = r.get(&ingest::TELEGRAM_WEBHOOK_SECRET);
    let whatsapp_verify_token = r.get(&ingest::WHATSAPP_VERIFY_TOKEN);
    let whatsapp_app_secret = r.get(&ingest::WHATSAPP_APP_SECRET);
    let d360_webhook_token = r.get(&ingest::D360_WEBHOOK_TOKEN);
    let d360_token_header = r.get(&ingest::D360_WEBHOOK_TOKEN_HEADER);
    let instagram_verify_token = r.get(&ingest::INSTAGRAM_VERIFY_TOKEN);
    let instagram_app_secret = r.get(&ingest::INSTAGRAM_APP_SECRET);
    let slack_signing_secret = r.get(&ingest::SLACK_SIGNING_SECRET);
    let discord_public_key = r.get(&ingest::DISCORD_PUBLIC_KEY).filter(|key| {
        // An Ed25519 public key is 32 bytes: a wrong one would refuse every request.
        let ok = key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit());
        if !ok {
            r.problem(format!("DISCORD_PUBLIC_KEY: {key:?} is not 64 hex digits"));
        }
        ok
    });
    Some(ChannelSecrets {
        telegram_webhook_secret,
        whatsapp_verify_token,
        whatsapp_app_secret,
        d360_webhook_token,
        d360_token_header: d360_token_header?,
        instagram_verify_token,
        instagram_app_secret,
        slack_signing_secret,
        discord_public_key,
        twilio: crate::sms::read_twilio_webhook(r),
        messenger: crate::sms::read_messenger_webhook(r),
        teams: crate::teams::read_teams_webhook(r),
    })
}

/// The TOML file at `path` (the built-in defaults without one), validated.
fn read_file(path: Option<&Path>, problems: &mut Vec<String>) -> FileConfig {
    let mut file = match path {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => match toml::from_str::<FileConfig>(&text) {
                Ok(f) => f,
                Err(e) => {
                    problems.push(format!("{}: {}", path.display(), e.to_string().trim()));
                    FileConfig::default()
                }
            },
            Err(e) => {
                problems.push(format!("cannot read config file {}: {e}", path.display()));
                FileConfig::default()
            }
        },
        None => FileConfig::default(),
    };
    file.api
        .load_core_prompt(path.and_then(Path::parent), problems);
    file.expand_model_names(problems);
    file.validate(problems);
    file
}
