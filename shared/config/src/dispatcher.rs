//! Hermes as the Forge contract's dispatcher (docs/agents.md, "The contract, item by item"):
//! the policy for assignments to paused agents and the JWT bearer of the agent MCP surface,
//! all from the environment.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use secrecy::SecretString;

use crate::env::{Reader, dispatcher};

/// What an assignment to a BUSY or OFFLINE external agent does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PausedAssignments {
    /// The run waits, unwoken, until the agent is ONLINE again or its reply deadline passes.
    #[default]
    Wait,
    /// The run is dispatched as if unassigned.
    Fallback,
}

impl PausedAssignments {
    /// The spelling of the setting.
    pub fn as_str(self) -> &'static str {
        match self {
            PausedAssignments::Wait => "wait",
            PausedAssignments::Fallback => "fallback",
        }
    }
}

impl fmt::Display for PausedAssignments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PausedAssignments {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "wait" => Ok(PausedAssignments::Wait),
            "fallback" => Ok(PausedAssignments::Fallback),
            _ => Err(format!("{s:?} is not wait or fallback")),
        }
    }
}

/// The signature algorithms a JWT bearer may use. `none` and every other algorithm are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JwtAlg {
    /// HMAC-SHA256 with a shared secret.
    Hs256,
    /// Ed25519 signatures checked with the public key.
    EdDsa,
}

impl JwtAlg {
    /// The `alg` header value.
    pub fn as_str(self) -> &'static str {
        match self {
            JwtAlg::Hs256 => "HS256",
            JwtAlg::EdDsa => "EdDSA",
        }
    }
}

impl FromStr for JwtAlg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "HS256" => Ok(JwtAlg::Hs256),
            "EdDSA" => Ok(JwtAlg::EdDsa),
            _ => Err(format!("{s:?} is not HS256 or EdDSA")),
        }
    }
}

/// One key that verifies JWT bearers: the token's `kid` header names it.
#[derive(Clone, Debug)]
pub struct JwtKey {
    pub kid: String,
    pub alg: JwtAlg,
    /// HS256: the shared secret; EdDSA: the public key as a JWK's `x` (base64url).
    pub key: SecretString,
}

/// The most leeway a token's times may be given: a token lives at most 15 minutes.
pub const MAX_JWT_LEEWAY: Duration = Duration::from_secs(60);

/// How the agent MCP surface takes JWT bearers.
#[derive(Clone, Debug)]
pub struct McpJwtSettings {
    /// `HERMES_MCP_JWT_KEYS`: empty, JWTs are not accepted (API keys only).
    pub keys: Vec<JwtKey>,
    /// `HERMES_MCP_JWT_ISSUER`: the `iss` a token must carry.
    pub issuer: String,
    /// `HERMES_MCP_JWT_AUDIENCE`: the `aud` a token must name.
    pub audience: String,
    /// `HERMES_MCP_JWT_LEEWAY_SECS`: allowed clock skew.
    pub leeway: Duration,
}

/// The dispatcher side's settings.
#[derive(Clone, Debug)]
pub struct DispatcherSettings {
    /// `HERMES_AGENT_PAUSED_ASSIGNMENTS`.
    pub paused_assignments: PausedAssignments,
    /// The JWT bearer of `/api/mcp`.
    pub jwt: McpJwtSettings,
}

/// The dispatcher settings (`None` when one of them left a problem behind).
pub(crate) fn read_dispatcher(r: &mut Reader<'_>) -> Option<DispatcherSettings> {
    let paused = r.get(&dispatcher::HERMES_AGENT_PAUSED_ASSIGNMENTS);
    let keys = r.get(&dispatcher::HERMES_MCP_JWT_KEYS).unwrap_or_default();
    let issuer = r.get(&dispatcher::HERMES_MCP_JWT_ISSUER);
    let audience = r.get(&dispatcher::HERMES_MCP_JWT_AUDIENCE);
    let leeway = r.get(&dispatcher::HERMES_MCP_JWT_LEEWAY_SECS);
    let leeway = match leeway {
        Some(l) if l > MAX_JWT_LEEWAY => {
            r.problem(format!(
                "HERMES_MCP_JWT_LEEWAY_SECS is above {} s",
                MAX_JWT_LEEWAY.as_secs()
            ));
            None
        }
        other => other,
    };
    Some(DispatcherSettings {
        paused_assignments: paused?,
        jwt: McpJwtSettings {
            keys,
            issuer: issuer?,
            audience: audience?,
            leeway: leeway?,
        },
    })
}
