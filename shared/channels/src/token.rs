//! Shared secrets a platform sends back verbatim (Telegram's
//! `X-Telegram-Bot-Api-Secret-Token`, 360dialog's token, Meta's handshake `hub.verify_token`),
//! compared in constant time. All fail closed: an empty configured token never matches. And
//! [`Signed`], the headers of a request signed with a timestamp (Slack, Discord).

use http::HeaderMap;
use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;

use crate::inbound::Refusal;

/// Whether `given` equals the configured `expected` token, in time independent of where
/// they differ. `false` when `given` is missing or `expected` is empty (unconfigured).
pub fn token_matches(expected: &str, given: Option<&str>) -> bool {
    match given {
        Some(given) if !expected.is_empty() => {
            bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
        }
        _ => false,
    }
}

/// The verdict on a request carrying `given` to a route whose token is `expected`: off
/// without one, else genuine only when they match.
pub fn check_token(expected: Option<&SecretString>, given: Option<&str>) -> Result<(), Refusal> {
    match expected {
        None => Err(Refusal::Off),
        Some(expected) if token_matches(expected.expose_secret(), given) => Ok(()),
        Some(_) => Err(Refusal::BadSignature),
    }
}

/// The check of a token route's body: its token, checked before the body was read, is the
/// whole proof, so only whether the route is on is left.
pub fn configured(expected: Option<&SecretString>) -> Result<(), Refusal> {
    expected.map(|_| ()).ok_or(Refusal::Off)
}

/// The value of header `name`, when it is there and visible ASCII.
pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A request signed with a timestamp, as Slack and Discord sign theirs: the signature header
/// and the timestamp header it covers.
#[derive(Clone, Copy, Debug)]
pub struct Signed {
    /// The header with the signature.
    pub signature: &'static str,
    /// The header with the request's Unix time.
    pub timestamp: &'static str,
    /// How far that time may be from now, in seconds, so a captured request cannot be
    /// replayed later.
    pub window_secs: i64,
}

impl Signed {
    /// The check made before the body is read: the route is on (`on`) and both headers are
    /// there.
    pub fn check_headers(&self, on: bool, headers: &HeaderMap) -> Result<(), Refusal> {
        if !on {
            return Err(Refusal::Off);
        }
        self.fresh(headers, None).map(|_| ())
    }

    /// The signature and the timestamp when both are there and, with `now` (Unix seconds),
    /// the timestamp is within the window of it.
    pub fn fresh<'a>(
        &self,
        headers: &'a HeaderMap,
        now: Option<i64>,
    ) -> Result<(&'a str, &'a str), Refusal> {
        let (Some(given), Some(timestamp)) = (
            header(headers, self.signature),
            header(headers, self.timestamp),
        ) else {
            return Err(Refusal::BadSignature);
        };
        let in_window = |now: i64| {
            (timestamp.parse::<i64>()).is_ok_and(|t| (now - t).abs() <= self.window_secs)
        };
        match now.is_none_or(in_window) {
            true => Ok((given, timestamp)),
            false => Err(Refusal::BadSignature),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn tokens() {
        assert!(token_matches("s3cret", Some("s3cret")));
        assert!(!token_matches("s3cret", Some("s3cre")));
        assert!(!token_matches("s3cret", Some("s3cret ")));
        assert!(!token_matches("s3cret", Some("S3CRET")));
        assert!(!token_matches("s3cret", Some("")));
        assert!(!token_matches("s3cret", None));
        assert!(!token_matches("", Some("")), "unconfigured never matches");
        assert!(!token_matches("", None));
    }

    #[test]
    fn a_route_without_its_token_is_off_and_with_it_checks_it() {
        let secret = SecretString::from("s3cret");
        assert_eq!(check_token(None, Some("s3cret")), Err(Refusal::Off));
        assert_eq!(check_token(Some(&secret), Some("s3cret")), Ok(()));
        assert_eq!(
            check_token(Some(&secret), Some("nope")),
            Err(Refusal::BadSignature)
        );
        assert_eq!(check_token(Some(&secret), None), Err(Refusal::BadSignature));
        assert_eq!(configured(Some(&secret)), Ok(()));
        assert_eq!(configured(None), Err(Refusal::Off));
    }

    #[test]
    fn headers_are_read_when_visible_ascii() {
        let mut headers = HeaderMap::new();
        headers.insert("x-token", HeaderValue::from_static("abc"));
        headers.insert("x-bytes", HeaderValue::from_bytes(b"\xff").unwrap());
        assert_eq!(header(&headers, "x-token"), Some("abc"));
        assert_eq!(header(&headers, "X-Token"), Some("abc"));
        assert_eq!(header(&headers, "x-bytes"), None);
        assert_eq!(header(&headers, "x-missing"), None);
    }
}
