//! Hermes as the Forge contract's dispatcher (docs/agents.md, "The contract, item by item"):
//! what an assignment to a paused (BUSY or OFFLINE) external agent does, and the short-lived
//! JWT bearer the agent MCP surface takes beside API keys: its verification keys (several,
//! named by `kid`, so a key can be rotated), the issuer and audience a token must name, and
//! the clock leeway.

use std::time::Duration;

use super::Unset::{Means, Value};
use super::{kinds, settings};
use crate::dispatcher::{JwtKey, PausedAssignments};

settings! {
    /// The dispatcher side of the Forge contract.
    SETTINGS = [
        HERMES_AGENT_PAUSED_ASSIGNMENTS: PausedAssignments {
            kind: kinds::PAUSED_ASSIGNMENTS,
            unset: Value("wait"),
            secret: false,
            help: "a message assigned to an external agent that is BUSY or OFFLINE (or silent past the presence window): `wait` holds the run, unwoken and out of the agent's inbox, until the agent is ONLINE again, bounded by its reply deadline; `fallback` dispatches it as if unassigned (a mention, round robin, else the persona). An internal agent that is BUSY or OFFLINE always falls back",
        },
        HERMES_MCP_JWT_KEYS: Vec<JwtKey> {
            kind: kinds::JWT_KEYS,
            unset: Means("(none: API keys only)"),
            secret: true,
            help: "comma-separated keys that verify short-lived JWT bearers on `/api/mcp`, each `kid:alg:key`: `HS256` with a secret of at least 32 characters, or `EdDSA` with an Ed25519 public key as a JWK's `x` (base64url, 43 characters). A token's `kid` header picks its key; list a new key beside the old one to rotate",
        },
        HERMES_MCP_JWT_ISSUER: String {
            kind: kinds::TEXT,
            unset: Value("forge"),
            secret: false,
            help: "the `iss` a JWT bearer on `/api/mcp` must carry",
        },
        HERMES_MCP_JWT_AUDIENCE: String {
            kind: kinds::TEXT,
            unset: Value("hermes"),
            secret: false,
            help: "the `aud` a JWT bearer on `/api/mcp` must name",
        },
        HERMES_MCP_JWT_LEEWAY_SECS: Duration {
            kind: kinds::SECS,
            unset: Value("30"),
            secret: false,
            help: "clock skew allowed when a JWT bearer's `exp`, `nbf` and `iat` are checked (at most 60)",
        },
    ]
}
