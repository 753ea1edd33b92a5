//! What the gateway's test binaries share: a gateway built from variables and a TOML file,
//! with the real Redis for its cache and budgets, and a request. Each test binary compiles
//! this module and uses a part of it.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use hermes_cache::Cache;
use hermes_config::Config;
use hermes_gateway::Gateway;
use hermes_gateway::backends::Backends;
use hermes_telemetry::Metrics;
use hermes_types::model::{ChatMessage, LlmRequest, Platform, ReplyTo, Role, Tier};

/// A gateway over the configuration `vars` (then the process environment) and `file` give.
pub fn gateway(vars: &[(String, String)], file: &Path) -> (Gateway, Metrics, Cache) {
    let config = Arc::new(
        Config::from_lookup(
            &|k| {
                vars.iter()
                    .find(|(n, _)| n == k)
                    .map(|(_, v)| v.clone())
                    .or_else(|| std::env::var(k).ok())
            },
            Some(file),
        )
        .expect("test configuration"),
    );
    let metrics = Metrics::new();
    let cache = Cache::new(&config.redis_url, config.namespace.clone(), metrics.clone()).unwrap();
    let backends = Backends::new(config.clone(), None).unwrap();
    let gateway = Gateway::with_parts(config, metrics.clone(), backends, cache.clone(), None);
    (gateway, metrics, cache)
}

/// A call of `chain` for an API caller: a system block, then `text` as the user's turn.
pub fn request(tier: Tier, chain: &[&str], text: &str) -> LlmRequest {
    LlmRequest::new(
        ReplyTo {
            platform: Platform::Api,
            chat_id: "c".into(),
            callback_url: None,
            quote: None,
            interaction: None,
        },
        tier,
        chain.iter().map(|s| s.to_string()).collect(),
        vec![
            ChatMessage::text(Role::System, "be brief"),
            ChatMessage::text(Role::User, text),
        ],
    )
}
