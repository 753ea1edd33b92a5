//! Hermes as a Forge agent: ingest's settings of the Forge wake route (docs/agents.md,
//! "Hermes as a Forge agent"), all from the environment. The route is off until a secret
//! is set, like every channel webhook.

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
    Some(ForgeSettings {
        secrets,
        path: path?,
        body_signature: body_signature?,
        workspace: workspace?,
        max_body_bytes: max_body_bytes?,
    })
}
