//! Hermes as a Forge agent (docs/agents.md, "Hermes as a Forge agent"): the secrets that
//! verify a Forge's signed wakes and open their route, the route's path, the body-only
//! signature of proxied paths, the workspace wakes route into, and the largest wake taken.

use secrecy::SecretString;

use super::Unset::{Means, Value};
use super::{kinds, settings};

settings! {
    /// Forge wakes.
    SETTINGS = [
        HERMES_FORGE_WEBHOOK_SECRETS: Vec<SecretString> {
            kind: kinds::SECRET_LIST,
            unset: Means("(none: route off)"),
            secret: true,
            help: "comma-separated secrets a Forge signs its wakes with (`X-Forge-Signature`); any one verifies, so a secret can be rotated by listing the new one beside the old; enables `POST /agents/forge`",
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
    ]
}
