//! A JSON Web Token in its compact form (RFC 7515, section 7.1; RFC 7519), read as far as
//! every verifier here needs before it checks a signature: three base64url parts, a header
//! and a claims set that are JSON objects, the bytes the signature covers, and the claims
//! the verifiers share (`exp`, `iat`, `nbf` as JSON numbers, `aud` as a string or a list).
//!
//! Which algorithms and keys are accepted is each verifier's own rule (the agent MCP
//! surface's HS256 and EdDSA bearers, Microsoft Teams' RS256 tokens), so nothing here
//! verifies: it only refuses what cannot be a token, and never panics on untrusted input.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};

/// A token's parts, split and decoded; the signature not yet checked.
pub struct Jws<'a> {
    /// The JOSE header (`alg`, `kid`, `typ`, …).
    pub header: Map<String, Value>,
    /// The claims set.
    pub claims: Map<String, Value>,
    /// What the signature covers: `{header}.{payload}` as sent.
    pub signed: &'a [u8],
    /// The signature's bytes.
    pub signature: Vec<u8>,
}

/// Why a token could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Not three base64url parts of JSON objects, or longer than the verifier takes.
    #[error("not a compact JWT")]
    Shape,
    /// A time claim (`exp`, `iat`, `nbf`) that is not a JSON number.
    #[error("a time claim is not a number")]
    TimeClaim,
}

impl<'a> Jws<'a> {
    /// `token` split and decoded; refused when longer than `max_bytes`.
    pub fn parse(token: &'a str, max_bytes: usize) -> Result<Self, Malformed> {
        if token.len() > max_bytes {
            return Err(Malformed::Shape);
        }
        let mut parts = token.split('.');
        let (Some(h), Some(p), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Malformed::Shape);
        };
        Ok(Self {
            header: object(h)?,
            claims: object(p)?,
            signed: &token.as_bytes()[..h.len() + 1 + p.len()],
            signature: URL_SAFE_NO_PAD.decode(s).map_err(|_| Malformed::Shape)?,
        })
    }

    /// A string of the header (`alg`, `kid`).
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header.get(name).and_then(Value::as_str)
    }

    /// A string claim (`iss`, `sub`, `serviceurl`).
    pub fn claim_str(&self, name: &str) -> Option<&str> {
        self.claims.get(name).and_then(Value::as_str)
    }

    /// A time claim in seconds since the epoch: absent is `None`; present, it must be a
    /// number, so a claim of another type is malformed, never skipped.
    pub fn time(&self, name: &str) -> Result<Option<f64>, Malformed> {
        match self.claims.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => n.as_f64().map(Some).ok_or(Malformed::TimeClaim),
            Some(_) => Err(Malformed::TimeClaim),
        }
    }

    /// Whether `aud`, a string or a list of strings, names `audience`.
    pub fn is_for(&self, audience: &str) -> bool {
        match self.claims.get("aud") {
            Some(Value::String(a)) => a == audience,
            Some(Value::Array(all)) => all.iter().any(|a| a.as_str() == Some(audience)),
            _ => false,
        }
    }
}

/// Whether `token` looks like a compact JWT (a JSON header, three parts) rather than an
/// opaque key.
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.bytes().filter(|b| *b == b'.').count() == 2
}

fn object(part: &str) -> Result<Map<String, Value>, Malformed> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| Malformed::Shape)?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(Malformed::Shape),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn token(header: &Value, claims: &Value, signature: &[u8]) -> String {
        let h = URL_SAFE_NO_PAD.encode(header.to_string());
        let p = URL_SAFE_NO_PAD.encode(claims.to_string());
        format!("{h}.{p}.{}", URL_SAFE_NO_PAD.encode(signature))
    }

    #[test]
    fn a_token_splits_into_what_its_signature_covers() {
        let t = token(
            &json!({"alg": "RS256", "kid": "k"}),
            &json!({"aud": ["x", "app"], "exp": 10, "iss": "i"}),
            b"sig",
        );
        let jws = Jws::parse(&t, 4096).unwrap();
        assert_eq!(jws.header_str("kid"), Some("k"));
        assert_eq!(jws.claim_str("iss"), Some("i"));
        assert_eq!(jws.time("exp"), Ok(Some(10.0)));
        assert_eq!(jws.time("nbf"), Ok(None));
        assert!(jws.is_for("app") && !jws.is_for("other"));
        assert_eq!(jws.signature, b"sig");
        assert_eq!(jws.signed, t.rsplit_once('.').unwrap().0.as_bytes());
        assert!(looks_like_jwt(&t));
    }

    #[test]
    fn what_cannot_be_a_token_is_malformed() {
        let good = token(&json!({"alg": "none"}), &json!({}), b"");
        assert!(Jws::parse(&good, 10).is_err(), "too long");
        for bad in [
            "",
            "a.b",
            "a.b.c.d",
            "!!.e30.e30",
            &token(&json!([1]), &json!({}), b""),
            &format!("{good}x!"),
        ] {
            assert!(Jws::parse(bad, 4096).is_err(), "{bad:?}");
        }
        let t = token(&json!({}), &json!({"exp": "soon"}), b"");
        let jws = Jws::parse(&t, 4096).unwrap();
        assert_eq!(jws.time("exp"), Err(Malformed::TimeClaim));
        assert!(!jws.is_for("app"));
    }
}
