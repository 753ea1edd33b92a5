//! Hermes as a Forge agent (docs/agents.md, "Hermes as a Forge agent"): the secrets that
//! verify a Forge's signed wakes and open their route, the route's path, the body-only
//! signature of proxied paths, the workspace wakes route into, the largest wake taken, the
//! wake rate of each secret, the daily budget of each workspace's Forge runs, and how often
//! Hermes tells the Forge it is present.

use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::Unset::{Means, Value};
use super::{Kind, kinds, settings};

/// The shortest secret a Forge may sign wakes with: a signature is only as strong as its
/// secret, and a short one can be guessed offline from a single captured wake.
pub const MIN_FORGE_SECRET_CHARS: usize = 32;

/// [`kinds::SECRET_LIST`] whose every secret has at least [`MIN_FORGE_SECRET_CHARS`] characters; a
/// short one is named by its position, never by its value.
const STRONG_SECRET_LIST: Kind<Vec<SecretString>> = Kind {
    parse: |name, value| {
        let secrets = (kinds::SECRET_LIST.parse)(name, value)?;
        let problems: Vec<String> = secrets
            .iter()
            .enumerate()
            .filter(|(_, s)| s.expose_secret().chars().count() < MIN_FORGE_SECRET_CHARS)
            .map(|(i, _)| {
                format!(
                    "{name}: secret {} is shorter than {MIN_FORGE_SECRET_CHARS} characters (make one with `openssl rand -hex 32`)",
                    i + 1
                )
            })
            .collect();
        if problems.is_empty() {
            Ok(secrets)
        } else {
            Err(problems)
        }
    },
    show: kinds::SECRET_LIST.show,
};

settings! {
    /// Forge wakes.
    SETTINGS = [
        HERMES_FORGE_WEBHOOK_SECRETS: Vec<SecretString> {
            kind: STRONG_SECRET_LIST,
            unset: Means("(none: route off)"),
            secret: true,
            help: "comma-separated secrets a Forge signs its wakes with (`X-Forge-Signature`), each at least 32 characters (a shorter one stops the process at start); any one verifies, so a secret can be rotated by listing the new one beside the old; enables (mounts) `POST /agents/forge`",
        },
        HERMES_FORGE_PATH: String {
            kind: kinds::ROUTE_PATH,
            unset: Value("/agents/forge"),
            secret: false,
            help: "the path a Forge POSTs its wakes to (the agent's `webhookUrl` names it)",
        },
        HERMES_FORGE_BODY_SIGNATURE: bool {
            kind: kinds::BOOL,
            unset: Value("false"),
            secret: false,
            help: "`true`: verify `X-Forge-Body-Signature` (the raw body alone, no timestamp) instead of `X-Forge-Signature`, for proxied paths that cannot keep `X-Forge-Timestamp`; replays are then stopped by the delivery id alone",
        },
        HERMES_FORGE_WORKSPACE: String {
            kind: kinds::TEXT,
            unset: Value("default"),
            secret: false,
            help: "the workspace (slug) whose agents a wake is routed to when its `workspace.slug` names no workspace of this install",
        },
        HERMES_FORGE_MAX_BODY_BYTES: usize {
            kind: kinds::COUNT_POSITIVE,
            unset: Value("65536"),
            secret: false,
            help: "largest wake body accepted on the Forge route; larger is 413",
        },
        HERMES_FORGE_WAKES_PER_MINUTE: u32 {
            kind: kinds::U32_POSITIVE,
            unset: Value("120"),
            secret: false,
            help: "wakes each Forge secret may deliver per minute (as many at once), counted once the signature holds and shared by every ingest replica; beyond, 429 with `Retry-After` and nothing queued",
        },
        HERMES_FORGE_DAILY_TOKENS: u64 {
            kind: kinds::U64,
            unset: Value("5000000"),
            secret: false,
            help: "tokens (input + output) the Forge runs of one workspace may use per UTC day, over every model call of their tool loops; beyond, the run fails with `budget_exceeded`. 0: no limit",
        },
        HERMES_FORGE_DAILY_USD: u64 {
            kind: kinds::DOLLARS,
            unset: Value("50"),
            secret: false,
            help: "dollars (the model map's prices) the Forge runs of one workspace may spend per UTC day; beyond, the run fails with `budget_exceeded`. 0: no limit",
        },
        HERMES_FORGE_HEARTBEAT_SECS: Duration {
            kind: kinds::SECS_POSITIVE,
            unset: Value("60"),
            secret: false,
            help: "how often the tools service calls the Forge's `agents.heartbeat` (ONLINE, BUSY at capacity) once `[mcp_servers.forge]` is connected; one replica at a time sends it, holding a lease of three intervals",
        },
    ]
}
