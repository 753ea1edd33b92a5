//! Slack's request signature (<https://api.slack.com/authentication/verifying-requests-from-slack>):
//! `X-Slack-Signature: v0=<hex>`, the HMAC-SHA256 of `v0:{X-Slack-Request-Timestamp}:{raw
//! body}` under the app's signing secret. A timestamp more than [`REPLAY_WINDOW_SECS`] from
//! now is refused, so a captured request cannot be replayed later. Fails closed: no secret
//! configured is the route off, an empty or missing header never matches.

use std::time::{SystemTime, UNIX_EPOCH};

use hermes_net::signing::hmac_sha256;
use http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;

use crate::inbound::Refusal;
use crate::token::Signed;

/// The header Slack signs a request in.
pub const SIGNATURE: &str = "x-slack-signature";
/// The header with the request's Unix time, which the signature covers.
pub const TIMESTAMP: &str = "x-slack-request-timestamp";
/// The header of a redelivery: how many times Slack tried before (1, 2, 3).
pub const RETRY_NUM: &str = "x-slack-retry-num";
/// How far a request's timestamp may be from now, in seconds (Slack's five minutes).
pub const REPLAY_WINDOW_SECS: i64 = 5 * 60;

/// The version prefix of the signature and of the signed string.
const VERSION: &str = "v0";
/// `v0=` and 64 hex digits.
const SIGNATURE_CHARS: usize = 67;

/// `v0=<lowercase hex>` of the signed string of `body` at `timestamp` under `secret`: the
/// value of `X-Slack-Signature` Slack would send (for tests and the load tool).
pub fn sign(secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    let tag = hmac_sha256(
        secret,
        &[VERSION.as_bytes(), b":", timestamp.as_bytes(), b":", body],
    );
    format!("{VERSION}={}", hex::encode(tag))
}

/// Slack's signed headers.
const SIGNED: Signed = Signed {
    signature: SIGNATURE,
    timestamp: TIMESTAMP,
    window_secs: REPLAY_WINDOW_SECS,
};

/// The check made before the body is read: the route is on and both headers are there.
pub fn check_headers(secret: Option<&SecretString>, headers: &HeaderMap) -> Result<(), Refusal> {
    SIGNED.check_headers(secret.is_some(), headers)
}

/// Whether `body` is signed by the holder of `secret` within the replay window of now.
pub fn check_body(
    secret: Option<&SecretString>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), Refusal> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    check_body_at(secret, headers, body, now)
}

/// [`check_body`] at the Unix time `now`.
pub fn check_body_at(
    secret: Option<&SecretString>,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Result<(), Refusal> {
    let secret = secret.ok_or(Refusal::Off)?.expose_secret().as_bytes();
    let (given, timestamp) = SIGNED.fresh(headers, Some(now))?;
    if secret.is_empty() || given.len() != SIGNATURE_CHARS {
        return Err(Refusal::BadSignature);
    }
    let expected = sign(secret, timestamp, body);
    // Slack writes lowercase hex; any case of the same digits is the same signature.
    let given = given.to_ascii_lowercase();
    match bool::from(expected.as_bytes().ct_eq(given.as_bytes())) {
        true => Ok(()),
        false => Err(Refusal::BadSignature),
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    // Slack's own example (https://api.slack.com/authentication/verifying-requests-from-slack).
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TS: &str = "1531420618";
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    fn headers(sig: &str, ts: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(SIGNATURE, HeaderValue::from_str(sig).unwrap());
        h.insert(TIMESTAMP, HeaderValue::from_str(ts).unwrap());
        h
    }

    #[test]
    fn slacks_published_example_verifies() {
        assert_eq!(sign(SECRET.as_bytes(), TS, BODY.as_bytes()), SIG);
        let secret = SecretString::from(SECRET);
        let at = TS.parse::<i64>().unwrap() + 10;
        let check =
            |h: &HeaderMap, body: &str, now| check_body_at(Some(&secret), h, body.as_bytes(), now);
        assert_eq!(check(&headers(SIG, TS), BODY, at), Ok(()));
        assert_eq!(
            check(
                &headers(&SIG.to_uppercase().replace("V0", "v0"), TS),
                BODY,
                at
            ),
            Ok(())
        );
        assert_eq!(
            check(&headers(SIG, TS), "x", at),
            Err(Refusal::BadSignature)
        );
        assert_eq!(check_headers(Some(&secret), &headers(SIG, TS)), Ok(()));
        assert_eq!(check_headers(None, &headers(SIG, TS)), Err(Refusal::Off));
        assert_eq!(
            check_headers(Some(&secret), &HeaderMap::new()),
            Err(Refusal::BadSignature)
        );
    }

    #[test]
    fn an_old_or_future_timestamp_is_refused_even_when_signed() {
        let secret = SecretString::from(SECRET);
        let t: i64 = TS.parse().unwrap();
        let check = |now| check_body_at(Some(&secret), &headers(SIG, TS), BODY.as_bytes(), now);
        assert_eq!(check(t + REPLAY_WINDOW_SECS), Ok(()));
        assert_eq!(check(t - REPLAY_WINDOW_SECS), Ok(()));
        assert_eq!(
            check(t + REPLAY_WINDOW_SECS + 1),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            check(t - REPLAY_WINDOW_SECS - 1),
            Err(Refusal::BadSignature)
        );
    }

    #[test]
    fn anything_else_is_refused() {
        let secret = SecretString::from(SECRET);
        let at: i64 = TS.parse().unwrap();
        let check = |h: &HeaderMap| check_body_at(Some(&secret), h, BODY.as_bytes(), at);
        for bad in [
            "",
            "v0=",
            &SIG[3..],
            &SIG[..SIG.len() - 1],
            &format!("{SIG}0"),
            &SIG.replace("v0=", "v1="),
            &format!("v0={}", "z".repeat(64)),
        ] {
            assert_eq!(
                check(&headers(bad, TS)),
                Err(Refusal::BadSignature),
                "{bad:?}"
            );
        }
        assert_eq!(check(&headers(SIG, "later")), Err(Refusal::BadSignature));
        // The signature covers the timestamp: another one does not verify.
        assert_eq!(
            check_body_at(
                Some(&secret),
                &headers(SIG, "1531420619"),
                BODY.as_bytes(),
                at
            ),
            Err(Refusal::BadSignature)
        );
        let empty = SecretString::from("");
        let signed = sign(b"", TS, BODY.as_bytes());
        assert_eq!(
            check_body_at(Some(&empty), &headers(&signed, TS), BODY.as_bytes(), at),
            Err(Refusal::BadSignature)
        );
    }
}
