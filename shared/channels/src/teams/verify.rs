//! The Bot Framework's bearer token on each request to the bot
//! (<https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-authentication#connector-to-bot>):
//! a JWT in `Authorization: Bearer …`, checked before a byte of the body is read.
//!
//! It must be RS256, signed by a key held for its `kid` (and endorsed for `msteams` when the
//! key lists endorsements), issued by `https://api.botframework.com`, for the bot's app id
//! (`aud`), and within its lifetime with five minutes of clock skew. Its `serviceurl` claim
//! must then be the activity's `serviceUrl` ([`service_url_matches`]), so a token taken
//! from one conversation cannot send the bot's answers, and its token, elsewhere.
//! Fails closed: no app id or no keys is the route off or every request refused.

use hermes_net::jws::Jws;
use http::HeaderMap;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, RsaPublicKeyComponents};

use super::keys::Keys;
use crate::inbound::Refusal;

/// The issuer of the Bot Framework's tokens.
pub const ISSUER: &str = "https://api.botframework.com";
/// The channel a key must be endorsed for.
pub const CHANNEL: &str = "msteams";
/// Clock skew allowed on `exp` and `nbf` (Microsoft's five minutes).
pub const LEEWAY_SECS: f64 = 5.0 * 60.0;
/// The longest bearer read as a token.
const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Why a token was refused (for the log; the caller sees only 401).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenRefusal {
    Missing,
    Malformed,
    Algorithm,
    UnknownKey,
    NotEndorsed,
    Signature,
    Issuer,
    Audience,
    Expired,
    FutureDated,
}

/// The `Authorization: Bearer` token of `headers`.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Check `token` for the bot `app_id` against `keys` at the Unix time `now`; its
/// `serviceurl` claim when it holds.
pub fn verify(
    keys: &Keys,
    app_id: &str,
    token: &str,
    now: f64,
) -> Result<Option<String>, TokenRefusal> {
    let jws = Jws::parse(token, MAX_TOKEN_BYTES).map_err(|_| TokenRefusal::Malformed)?;
    if jws.header_str("alg") != Some("RS256") {
        return Err(TokenRefusal::Algorithm);
    }
    let kid = jws.header_str("kid").ok_or(TokenRefusal::UnknownKey)?;
    let key = keys.get(kid).ok_or(TokenRefusal::UnknownKey)?;
    if !key.endorsements.is_empty() && !key.endorsements.iter().any(|e| e == CHANNEL) {
        return Err(TokenRefusal::NotEndorsed);
    }
    RsaPublicKeyComponents {
        n: &key.n,
        e: &key.e,
    }
    .verify(&RSA_PKCS1_2048_8192_SHA256, jws.signed, &jws.signature)
    .map_err(|_| TokenRefusal::Signature)?;
    if jws.claim_str("iss") != Some(ISSUER) {
        return Err(TokenRefusal::Issuer);
    }
    if app_id.is_empty() || !jws.is_for(app_id) {
        return Err(TokenRefusal::Audience);
    }
    let exp = jws.time("exp").map_err(|_| TokenRefusal::Malformed)?;
    if exp.is_none_or(|exp| now > exp + LEEWAY_SECS) {
        return Err(TokenRefusal::Expired);
    }
    let nbf = jws.time("nbf").map_err(|_| TokenRefusal::Malformed)?;
    if nbf.is_some_and(|nbf| nbf > now + LEEWAY_SECS) {
        return Err(TokenRefusal::FutureDated);
    }
    Ok(jws.claim_str("serviceurl").map(str::to_owned))
}

/// The headers' token checked at `now`, as a refusal the route answers with.
pub fn check(
    keys: Option<&Keys>,
    app_id: Option<&str>,
    headers: &HeaderMap,
    now: f64,
) -> Result<Option<String>, Refusal> {
    let (Some(keys), Some(app_id)) = (keys, app_id) else {
        return Err(Refusal::Off);
    };
    let refused = |why: TokenRefusal| {
        tracing::debug!(?why, "a Teams request's token was refused");
        Refusal::BadSignature
    };
    let token = bearer(headers).ok_or_else(|| refused(TokenRefusal::Missing))?;
    verify(keys, app_id, token, now).map_err(refused)
}

/// `claims` as a token signed RS256 by the RSA key `key_der` (PKCS#1 DER) under `kid`, as the
/// Bot Framework signs its own: for tests and the load tool, which list the key's public half
/// as the fleet's keys. `None` when the key does not read.
pub fn sign(key_der: &[u8], kid: &str, claims: &serde_json::Value) -> Option<String> {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use ring::rand::SystemRandom;
    use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};

    let pair = RsaKeyPair::from_der(key_der).ok()?;
    let header = serde_json::json!({"alg": "RS256", "kid": kid, "typ": "JWT"});
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let mut signature = vec![0; pair.public().modulus_len()];
    let rng = SystemRandom::new();
    (pair.sign(&RSA_PKCS1_SHA256, &rng, signed.as_bytes(), &mut signature)).ok()?;
    Some(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// Whether the token's `serviceurl` claim names the activity's `serviceUrl` (a trailing `/`
/// aside, and case aside in the scheme and host). A token without the claim matches none.
pub fn service_url_matches(claim: Option<&str>, activity: Option<&str>) -> bool {
    let norm = |u: &str| u.trim_end_matches('/').to_ascii_lowercase();
    match (claim, activity) {
        (Some(c), Some(a)) => norm(c) == norm(a),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
