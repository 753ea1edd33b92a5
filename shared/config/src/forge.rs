//! Hermes as a Forge agent: ingest's settings of the Forge wake route (docs/agents.md,
//! "Hermes as a Forge agent"), all from the environment. The route is off until a secret
//! is set, like every channel webhook.

use std::time::Duration;

use secrecy::SecretString;

use crate::env::{Reader, forge};

/// How ingest takes a Forge's wakes.
#[derive(Clone, Debug)]
pub struct ForgeSettings {
    /// `HERMES_FORGE_WEBHOOK_SECRETS`: any one verifies a wake; empty: the route is off (404).
    pub secrets: Vec<SecretString>,
    /// `HERMES_FORGE_PATH`: where the route is mounted.
    pub path: String,
    /// `HERMES_FORGE_BODY_SIGNATURE`: verify the body-only signature instead of the
    /// timestamped one (proxied paths).
    pub body_signature: bool,
    /// `HERMES_FORGE_WORKSPACE`: the workspace (slug) of a wake whose own slug is unknown.
    pub workspace: String,
    /// `HERMES_FORGE_MAX_BODY_BYTES`: the largest wake body.
    pub max_body_bytes: usize,
    /// `HERMES_FORGE_WAKES_PER_MINUTE`: wakes per secret per minute (as many at once).
    pub wakes_per_minute: u32,
    /// The daily budget of each workspace's Forge runs.
    pub budget: ForgeBudget,
    /// `HERMES_FORGE_HEARTBEAT_SECS`: how often `agents.heartbeat` is sent to the Forge.
    pub heartbeat: Duration,
}

/// What the Forge runs of one workspace may use per UTC day (`None`: no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForgeBudget {
    /// `HERMES_FORGE_DAILY_TOKENS`: input + output tokens.
    pub daily_tokens: Option<u64>,
    /// `HERMES_FORGE_DAILY_USD`, in micro-dollars.
    pub daily_micro_usd: Option<u64>,
}

impl ForgeBudget {
    /// Whether any limit is set (without one, nothing is read or counted).
    pub fn is_limited(&self) -> bool {
        self.daily_tokens.is_some() || self.daily_micro_usd.is_some()
    }
}

impl ForgeSettings {
    /// Whether the route is open: at least one secret is configured.
    pub fn enabled(&self) -> bool {
        !self.secrets.is_empty()
    }
}

/// The Forge settings (`None` when one of them left a problem behind).
pub(crate) fn read_forge(r: &mut Reader<'_>) -> Option<ForgeSettings> {
    let secrets = r
        .get(&forge::HERMES_FORGE_WEBHOOK_SECRETS)
        .unwrap_or_default();
    let path = r.get(&forge::HERMES_FORGE_PATH);
    let body_signature = r.get(&forge::HERMES_FORGE_BODY_SIGNATURE);
    let workspace = r.get(&forge::HERMES_FORGE_WORKSPACE);
    let max_body_bytes = r.get(&forge::HERMES_FORGE_MAX_BODY_BYTES);
    let wakes_per_minute = r.get(&forge::HERMES_FORGE_WAKES_PER_MINUTE);
    // 0 is "no limit".
    let limit = |n: u64| (n > 0).then_some(n);
    let daily_tokens = r.get(&forge::HERMES_FORGE_DAILY_TOKENS).map(limit);
    let daily_micro_usd = r.get(&forge::HERMES_FORGE_DAILY_USD).map(limit);
    let heartbeat = r.get(&forge::HERMES_FORGE_HEARTBEAT_SECS);
    Some(ForgeSettings {
        secrets,
        path: path?,
        body_signature: body_signature?,
        workspace: workspace?,
        max_body_bytes: max_body_bytes?,
        wakes_per_minute: wakes_per_minute?,
        budget: ForgeBudget {
            daily_tokens: daily_tokens?,
            daily_micro_usd: daily_micro_usd?,
        },
        heartbeat: heartbeat?,
    })
}
