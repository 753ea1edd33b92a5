//! A Forge wake's signature, checked on the raw bytes before anything parses them
//! (docs/agents.md, "Hermes as a Forge agent"). By default `X-Forge-Signature` is
//! `sha256=<hex>` of HMAC-SHA256 over `"{X-Forge-Timestamp}.{raw body}"` and the timestamp
//! must be within 300 s of now, which makes a captured wake useless after five minutes.
//! Where a proxy cannot keep the timestamp header (`HERMES_FORGE_BODY_SIGNATURE=true`),
//! `X-Forge-Body-Signature` over the raw body alone is verified instead and replays are
//! stopped by the body itself. Any configured secret verifies (rotation); every
//! comparison is constant-time (the HMAC code is the one that signs Hermes's own wakes).
//!
//! A verified wake is known by what its signature covers ([`Verified::covered`]): the SHA-256
//! of `"{timestamp}.{body}"`, or of the body alone in the body-only scheme. A captured wake
//! replayed under a fresh `X-Forge-Delivery` (which no signature covers) carries the same
//! covered bytes and is refused for it; the signature's own spelling (hex case, spaces) is
//! not part of it, so re-spelling a captured signature changes nothing.

use axum::http::HeaderMap;
use hermes_net::signing::{
    FORGE_BODY_SIGNATURE, FORGE_SIGNATURE, FORGE_TIMESTAMP, sha256_tag, sha256_tag_valid,
    sha256_tag_valid_over,
};
use hermes_runtime::http::ApiErrorCode;
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

/// How far `X-Forge-Timestamp` may be from now, either way.
pub const TOLERANCE_SECS: i64 = 300;

/// Which signature a route verifies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// `X-Forge-Signature` over `"{timestamp}.{body}"`, with the timestamp's tolerance.
    Timestamped,
    /// `X-Forge-Body-Signature` over the body alone (proxied paths).
    BodyOnly,
}

/// Why a wake's signature was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignatureError {
    /// The header the scheme verifies (or the timestamp it covers) is absent.
    Missing(&'static str),
    /// `X-Forge-Timestamp` is not Unix seconds.
    BadTimestamp,
    /// The timestamp is more than [`TOLERANCE_SECS`] away from now.
    Stale,
    /// No configured secret produces the signature.
    Mismatch,
}

impl SignatureError {
    /// The error code callers see and the `outcome` label of the wake metric.
    pub fn code(self) -> ApiErrorCode {
        match self {
            SignatureError::Missing(_) => ApiErrorCode::MissingSignature,
            SignatureError::BadTimestamp => ApiErrorCode::InvalidTimestamp,
            SignatureError::Stale => ApiErrorCode::StaleTimestamp,
            SignatureError::Mismatch => ApiErrorCode::InvalidSignature,
        }
    }

    /// What the caller is told.
    pub fn message(self) -> String {
        match self {
            SignatureError::Missing(header) => format!("the {header} header is required"),
            SignatureError::BadTimestamp => {
                format!("{FORGE_TIMESTAMP} must be Unix seconds")
            }
            SignatureError::Stale => format!(
                "{FORGE_TIMESTAMP} is more than {TOLERANCE_SECS} s from this server's clock; the wake is refused as a possible replay"
            ),
            SignatureError::Mismatch => "the signature does not match any configured secret".into(),
        }
    }
}

/// A wake whose signature held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified {
    /// The position of the configured secret that signed it (its wake rate is counted).
    pub secret: usize,
    /// SHA-256 of what the signature covers: the wake's identity against replays.
    pub covered: [u8; 32],
}

/// Verify `body` as signed under `scheme` by one of `secrets`, `now` in Unix seconds.
pub fn verify(
    scheme: Scheme,
    secrets: &[SecretString],
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<Verified, SignatureError> {
    let header = |name: &'static str| headers.get(name).and_then(|v| v.to_str().ok());
    let keys: Vec<&[u8]> = secrets
        .iter()
        .map(|s| s.expose_secret().as_bytes())
        .collect();
    let signature = match scheme {
        Scheme::BodyOnly => header(FORGE_BODY_SIGNATURE),
        Scheme::Timestamped => header(FORGE_SIGNATURE),
    };
    check(scheme, &keys, signature, header(FORGE_TIMESTAMP), body, now)
}

/// [`verify`] on the header values themselves (`signature` is the one `scheme` names): the
/// part a fuzz target drives with arbitrary bytes.
pub fn check(
    scheme: Scheme,
    keys: &[&[u8]],
    signature: Option<&str>,
    timestamp: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<Verified, SignatureError> {
    match scheme {
        Scheme::BodyOnly => {
            let signature = signature.ok_or(SignatureError::Missing(FORGE_BODY_SIGNATURE))?;
            let secret = any_secret(keys, |key| sha256_tag_valid(key, body, Some(signature)))?;
            Ok(Verified {
                secret,
                covered: Sha256::digest(body).into(),
            })
        }
        Scheme::Timestamped => {
            let signature = signature.ok_or(SignatureError::Missing(FORGE_SIGNATURE))?;
            let raw_ts = timestamp.ok_or(SignatureError::Missing(FORGE_TIMESTAMP))?;
            let ts: i64 = raw_ts
                .trim()
                .parse()
                .map_err(|_| SignatureError::BadTimestamp)?;
            // The signature is checked first: an unsigned caller learns nothing of the clock.
            let signed = [raw_ts.as_bytes(), b".", body];
            let secret = any_secret(keys, |key| {
                sha256_tag_valid_over(key, &signed, Some(signature))
            })?;
            if now.abs_diff(ts) > TOLERANCE_SECS.unsigned_abs() {
                return Err(SignatureError::Stale);
            }
            let mut covered = Sha256::new();
            for part in signed {
                covered.update(part);
            }
            Ok(Verified {
                secret,
                covered: covered.finalize().into(),
            })
        }
    }
}

/// The `X-Forge-Signature` a Forge sends for `body` at `timestamp` under `key` (for tests
/// and the fuzz target: the one signing code of `hermes_net` produces it).
pub fn sign(key: &[u8], timestamp: &str, body: &[u8]) -> String {
    let mut signed = Vec::with_capacity(timestamp.len() + 1 + body.len());
    signed.extend_from_slice(timestamp.as_bytes());
    signed.push(b'.');
    signed.extend_from_slice(body);
    sha256_tag(key, &signed)
}

/// The position of the first secret that verifies. Every secret is tried even after a
/// match, so the time taken does not tell which one (or whether an early one) matched.
fn any_secret(keys: &[&[u8]], valid: impl Fn(&[u8]) -> bool) -> Result<usize, SignatureError> {
    let matched = keys
        .iter()
        .enumerate()
        .fold(None, |found, (i, key)| match (valid(key), found) {
            (true, None) => Some(i),
            (_, found) => found,
        });
    matched.ok_or(SignatureError::Mismatch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_net::signing::{WakeSigning, wake_headers};

    const NOW: i64 = 1_714_080_000;

    fn signed(secret: &str, ts: i64, body: &[u8]) -> HeaderMap {
        let signing = WakeSigning {
            event: "AGENT_ASSIGNED",
            delivery_id: "dlv_1",
            timestamp: ts,
            standard: false,
        };
        let mut headers = HeaderMap::new();
        for (name, value) in wake_headers(secret.as_bytes(), &signing, body) {
            headers.insert(name, value.parse().unwrap());
        }
        headers
    }

    fn secrets(list: &[&str]) -> Vec<SecretString> {
        list.iter()
            .map(|s| SecretString::from(s.to_string()))
            .collect()
    }

    #[test]
    fn sign_is_what_a_wake_carries() {
        let body = br#"{"kind":"AGENT_ASSIGNED"}"#;
        let h = signed("k", NOW, body);
        let carried = h.get(FORGE_SIGNATURE).unwrap().to_str().unwrap();
        assert_eq!(sign(b"k", &NOW.to_string(), body), carried);
    }

    #[test]
    fn a_wake_signed_with_any_configured_secret_verifies_within_the_tolerance() {
        let body = br#"{"kind":"AGENT_ASSIGNED"}"#;
        let both = secrets(&["old", "new"]);
        for (i, secret) in ["old", "new"].into_iter().enumerate() {
            let h = signed(secret, NOW - 299, body);
            let v = verify(Scheme::Timestamped, &both, &h, body, NOW).unwrap();
            assert_eq!(v.secret, i, "the secret that signed is known");
        }
        let h = signed("other", NOW, body);
        assert_eq!(
            verify(Scheme::Timestamped, &both, &h, body, NOW),
            Err(SignatureError::Mismatch)
        );
        // The body is covered: one byte changed and nothing verifies.
        let h = signed("new", NOW, body);
        assert_eq!(
            verify(
                Scheme::Timestamped,
                &both,
                &h,
                br#"{"kind":"AGENT_ASSIGNEd"}"#,
                NOW
            ),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn stale_and_future_timestamps_are_refused_and_the_timestamp_is_signed() {
        let body = b"{}";
        let s = secrets(&["k"]);
        let h = signed("k", NOW - 301, body);
        assert_eq!(
            verify(Scheme::Timestamped, &s, &h, body, NOW),
            Err(SignatureError::Stale)
        );
        let h = signed("k", NOW + 301, body);
        assert_eq!(
            verify(Scheme::Timestamped, &s, &h, body, NOW),
            Err(SignatureError::Stale)
        );
        // A fresh timestamp put on an old signature does not verify.
        let mut h = signed("k", NOW - 1000, body);
        h.insert(FORGE_TIMESTAMP, NOW.to_string().parse().unwrap());
        assert_eq!(
            verify(Scheme::Timestamped, &s, &h, body, NOW),
            Err(SignatureError::Mismatch)
        );
        h.insert(FORGE_TIMESTAMP, "soon".parse().unwrap());
        assert_eq!(
            verify(Scheme::Timestamped, &s, &h, body, NOW),
            Err(SignatureError::BadTimestamp)
        );
        h.remove(FORGE_TIMESTAMP);
        assert_eq!(
            verify(Scheme::Timestamped, &s, &h, body, NOW),
            Err(SignatureError::Missing(FORGE_TIMESTAMP))
        );
    }

    #[test]
    fn the_body_only_scheme_reads_the_body_signature_alone() {
        let body = b"{\"a\":1}";
        let s = secrets(&["k"]);
        // Any timestamp, even a stale one: a proxy may have rewritten it.
        let mut h = signed("k", NOW - 10_000, body);
        let v = verify(Scheme::BodyOnly, &s, &h, body, NOW).unwrap();
        assert_eq!(v.covered, <[u8; 32]>::from(Sha256::digest(body)));
        h.remove(FORGE_BODY_SIGNATURE);
        assert_eq!(
            verify(Scheme::BodyOnly, &s, &h, body, NOW),
            Err(SignatureError::Missing(FORGE_BODY_SIGNATURE))
        );
        // The timestamped route does not take a body-only signature.
        let mut h = signed("k", NOW, body);
        h.remove(FORGE_SIGNATURE);
        assert_eq!(
            verify(Scheme::Timestamped, &s, &h, body, NOW),
            Err(SignatureError::Missing(FORGE_SIGNATURE))
        );
    }

    #[test]
    fn a_wake_is_known_by_what_its_signature_covers_not_by_its_spelling() {
        let body = br#"{"kind":"AGENT_ASSIGNED"}"#;
        let s = secrets(&["k"]);
        let h = signed("k", NOW, body);
        let first = verify(Scheme::Timestamped, &s, &h, body, NOW).unwrap();
        // The same capture with its signature re-spelled (upper-case hex, spaces): one wake.
        let mut respelled = h.clone();
        let sig = h.get(FORGE_SIGNATURE).unwrap().to_str().unwrap();
        let upper = format!(" sha256={} ", sig["sha256=".len()..].to_uppercase());
        respelled.insert(FORGE_SIGNATURE, upper.parse().unwrap());
        let again = verify(Scheme::Timestamped, &s, &respelled, body, NOW).unwrap();
        assert_eq!(first.covered, again.covered);
        // Signed a second later, or over another body: another wake.
        let later = signed("k", NOW + 1, body);
        let other = verify(Scheme::Timestamped, &s, &later, body, NOW).unwrap();
        assert_ne!(first.covered, other.covered);
    }
}
