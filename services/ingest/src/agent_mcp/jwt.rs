//! Short-lived JWT bearers on the agent MCP surface (docs/agents.md, "JWT bearers"): the
//! contract's alternative to API keys. A token is signed with HS256 or EdDSA (Ed25519) under
//! one of the keys of `HERMES_MCP_JWT_KEYS`, picked by its `kid` header; it must carry the
//! configured `iss` and `aud`, an `exp` at most 15 minutes ahead (and at most 15 minutes after
//! its `iat`), no `iat` or `nbf` in the future beyond the leeway, and `sub`, the agent it
//! speaks for. `alg: none` and every other algorithm are refused, as is an algorithm other
//! than the one its key is listed with (no algorithm confusion). Time claims must be JSON
//! numbers: a claim of another type is malformed, never skipped.
//!
//! Verification uses `hmac`/`sha2` (HS256, constant-time comparison) and `ring` (Ed25519),
//! both already in the tree: the `jsonwebtoken` versions free of GHSA-h395-gr6q-cpjc (10.3
//! and later) need a crypto backend that either pulls the `rsa` crate (RUSTSEC-2023-0071, no
//! fixed version) or a C build (docs/security.md, "Agent JWT bearers").

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hermes_config::{JwtAlg, McpJwtSettings};
use hermes_net::jws::{Jws, Malformed};
use hermes_types::ids::AgentId;
use hmac::{Hmac, Mac};
use secrecy::ExposeSecret;
use serde_json::Value;
use sha2::Sha256;

/// The longest a token may live: the contract's 15 minutes.
pub const MAX_LIFETIME_SECS: f64 = 15.0 * 60.0;
/// The longest bearer read as a JWT; a longer one is refused unread.
const MAX_TOKEN_BYTES: usize = 4096;

/// How one listed key verifies.
enum Material {
    Hmac(Vec<u8>),
    Ed25519(Vec<u8>),
}

struct Key {
    kid: String,
    alg: JwtAlg,
    material: Material,
}

/// Why a JWT bearer was refused (the `outcome` label of `hermes_mcp_jwt_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JwtRefusal {
    /// Not three base64url parts of JSON objects, a time claim that is not a number, or too long.
    Malformed,
    /// `alg` is `none`, unknown, or not the algorithm its key is listed with.
    Algorithm,
    /// No listed key has its `kid` (or, with several keys, it names none).
    UnknownKey,
    /// The signature does not verify.
    Signature,
    /// Past its `exp` (beyond the leeway), or without one.
    Expired,
    /// Its `iat` or `nbf` is in the future beyond the leeway.
    FutureDated,
    /// It lives longer than 15 minutes.
    TooLong,
    /// Not the configured `iss`.
    Issuer,
    /// Not for the configured `aud`.
    Audience,
    /// `sub` is not an agent id.
    Subject,
}

impl JwtRefusal {
    pub const ALL: [JwtRefusal; 10] = [
        JwtRefusal::Malformed,
        JwtRefusal::Algorithm,
        JwtRefusal::UnknownKey,
        JwtRefusal::Signature,
        JwtRefusal::Expired,
        JwtRefusal::FutureDated,
        JwtRefusal::TooLong,
        JwtRefusal::Issuer,
        JwtRefusal::Audience,
        JwtRefusal::Subject,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JwtRefusal::Malformed => "malformed",
            JwtRefusal::Algorithm => "algorithm",
            JwtRefusal::UnknownKey => "unknown_key",
            JwtRefusal::Signature => "signature",
            JwtRefusal::Expired => "expired",
            JwtRefusal::FutureDated => "future_dated",
            JwtRefusal::TooLong => "too_long",
            JwtRefusal::Issuer => "issuer",
            JwtRefusal::Audience => "audience",
            JwtRefusal::Subject => "subject",
        }
    }
}

/// Verifies JWT bearers against the configured keys and claims.
pub struct JwtVerifier {
    keys: Vec<Key>,
    issuer: String,
    audience: String,
    leeway: f64,
}

pub use hermes_net::jws::looks_like_jwt;

impl From<Malformed> for JwtRefusal {
    fn from(_: Malformed) -> Self {
        JwtRefusal::Malformed
    }
}

impl JwtVerifier {
    /// The verifier of `settings`; `None` when no key is listed (API keys only). A key that
    /// cannot be decoded stops the process at start.
    pub fn new(settings: &McpJwtSettings) -> anyhow::Result<Option<Self>> {
        if settings.keys.is_empty() {
            return Ok(None);
        }
        let mut keys = Vec::with_capacity(settings.keys.len());
        for k in &settings.keys {
            let raw = k.key.expose_secret();
            let material = match k.alg {
                JwtAlg::Hs256 => Material::Hmac(raw.as_bytes().to_vec()),
                JwtAlg::EdDsa => {
                    let public = URL_SAFE_NO_PAD.decode(raw).ok().filter(|p| p.len() == 32);
                    Material::Ed25519(public.ok_or_else(|| {
                        anyhow::anyhow!(
                            "HERMES_MCP_JWT_KEYS: key {:?} is not an Ed25519 public key",
                            k.kid
                        )
                    })?)
                }
            };
            keys.push(Key {
                kid: k.kid.clone(),
                alg: k.alg,
                material,
            });
        }
        Ok(Some(Self {
            keys,
            issuer: settings.issuer.clone(),
            audience: settings.audience.clone(),
            leeway: settings.leeway.as_secs_f64(),
        }))
    }

    /// The agent `token` speaks for at `now` (seconds since the epoch), or why it is refused.
    pub fn verify(&self, token: &str, now: f64) -> Result<AgentId, JwtRefusal> {
        let jws = Jws::parse(token, MAX_TOKEN_BYTES)?;
        let alg: JwtAlg = jws
            .header_str("alg")
            .ok_or(JwtRefusal::Malformed)?
            .parse()
            .map_err(|_| JwtRefusal::Algorithm)?;
        let key = match jws.header.get("kid") {
            Some(Value::String(kid)) => self.keys.iter().find(|k| &k.kid == kid),
            None if self.keys.len() == 1 => self.keys.first(),
            _ => None,
        }
        .ok_or(JwtRefusal::UnknownKey)?;
        if key.alg != alg {
            return Err(JwtRefusal::Algorithm);
        }
        let (signed, signature) = (jws.signed, &jws.signature);
        let verified = match &key.material {
            Material::Hmac(secret) => Hmac::<Sha256>::new_from_slice(secret)
                .map(|mut mac| {
                    mac.update(signed);
                    mac.verify_slice(signature).is_ok()
                })
                .unwrap_or(false),
            Material::Ed25519(public) => {
                ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, public)
                    .verify(signed, signature)
                    .is_ok()
            }
        };
        if !verified {
            return Err(JwtRefusal::Signature);
        }
        self.check_claims(&jws, now)
    }

    /// The claims of a token whose signature holds.
    fn check_claims(&self, jws: &Jws<'_>, now: f64) -> Result<AgentId, JwtRefusal> {
        let exp = jws.time("exp")?.ok_or(JwtRefusal::Expired)?;
        let iat = jws.time("iat")?;
        let nbf = jws.time("nbf")?;
        if now > exp + self.leeway {
            return Err(JwtRefusal::Expired);
        }
        if [iat, nbf]
            .into_iter()
            .flatten()
            .any(|t| t > now + self.leeway)
        {
            return Err(JwtRefusal::FutureDated);
        }
        if exp - now > MAX_LIFETIME_SECS + self.leeway
            || iat.is_some_and(|iat| exp - iat > MAX_LIFETIME_SECS)
        {
            return Err(JwtRefusal::TooLong);
        }
        if jws.claim_str("iss") != Some(self.issuer.as_str()) {
            return Err(JwtRefusal::Issuer);
        }
        if !jws.is_for(&self.audience) {
            return Err(JwtRefusal::Audience);
        }
        jws.claim_str("sub")
            .and_then(|s| s.parse::<AgentId>().ok())
            .ok_or(JwtRefusal::Subject)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hermes_config::JwtKey;
    use secrecy::SecretString;

    use super::*;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn verifier() -> JwtVerifier {
        JwtVerifier::new(&McpJwtSettings {
            keys: vec![JwtKey {
                kid: "k1".into(),
                alg: JwtAlg::Hs256,
                key: SecretString::from(SECRET),
            }],
            issuer: "forge".into(),
            audience: "hermes".into(),
            leeway: Duration::from_secs(30),
        })
        .unwrap()
        .unwrap()
    }

    fn hs256(header: &Value, claims: &Value) -> String {
        let h = URL_SAFE_NO_PAD.encode(header.to_string());
        let p = URL_SAFE_NO_PAD.encode(claims.to_string());
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
        mac.update(format!("{h}.{p}").as_bytes());
        let s = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{h}.{p}.{s}")
    }

    #[test]
    fn a_time_claim_of_another_type_is_malformed_never_skipped() {
        let v = verifier();
        let agent = AgentId::new();
        let header = serde_json::json!({"alg": "HS256", "kid": "k1"});
        let now = 1_800_000_000.0;
        let good = serde_json::json!({"iss": "forge", "aud": "hermes", "sub": agent,
            "iat": now, "exp": now + 60.0});
        assert_eq!(v.verify(&hs256(&header, &good), now), Ok(agent));
        for (claim, value) in [("exp", "1"), ("nbf", "99999999999"), ("iat", "x")] {
            let mut bad = good.clone();
            bad[claim] = Value::String(value.into());
            assert_eq!(
                v.verify(&hs256(&header, &bad), now),
                Err(JwtRefusal::Malformed),
                "{claim}"
            );
        }
        let mut long = good.clone();
        long["exp"] = serde_json::json!(now + 3600.0);
        assert_eq!(
            v.verify(&hs256(&header, &long), now),
            Err(JwtRefusal::TooLong)
        );
        assert!(looks_like_jwt(&hs256(&header, &good)));
        assert!(!looks_like_jwt("hk_live_0123.4567"));
    }
}
