//! Meta's webhook authenticity, the same for WhatsApp's Cloud API and Instagram:
//! `X-Hub-Signature-256` over the raw body
//! (<https://developers.facebook.com/docs/graph-api/webhooks/getting-started#validate-payloads>)
//! and the `hub.mode=subscribe` handshake
//! (<https://developers.facebook.com/docs/graph-api/webhooks/getting-started#verification-requests>).
//!
//! Both fail closed: an empty configured secret or token never matches anything.

use hermes_net::signing;

use crate::token::token_matches;

/// The header Meta signs a webhook's body in.
pub const HUB_SIGNATURE: &str = "x-hub-signature-256";

/// The longest challenge echoed back by [`handshake`].
pub const MAX_CHALLENGE_CHARS: usize = 512;

/// Whether `header` (the value of `X-Hub-Signature-256`, `sha256=<hex>`) is the
/// HMAC-SHA256 of the raw `body` under `secret`. Hex may be upper or lower case; the
/// comparison is constant-time. `false` when the header is missing or malformed, or the
/// secret is empty (unconfigured).
pub fn hub_signature_valid(secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    signing::sha256_tag_valid(secret, body, header)
}

/// `sha256=<lowercase hex>` of HMAC-SHA256(`secret`, `body`): the value of
/// `X-Hub-Signature-256` Meta would send (for tests and the load tool).
pub fn sign_hub(secret: &[u8], body: &[u8]) -> String {
    signing::sha256_tag(secret, body)
}

/// Meta's subscription handshake (`GET ?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`):
/// the challenge to echo back, only when the mode is `subscribe`, the token matches
/// `expected_token`, and the challenge is 1 to [`MAX_CHALLENGE_CHARS`] printable ASCII
/// characters (so echoing it is safe). `None`: the handshake is refused.
pub fn handshake(
    expected_token: &str,
    mode: Option<&str>,
    token: Option<&str>,
    challenge: Option<&str>,
) -> Option<String> {
    if mode != Some("subscribe") || !token_matches(expected_token, token) {
        return None;
    }
    let challenge = challenge?;
    let printable = challenge.bytes().all(|b| (0x20..=0x7e).contains(&b));
    (printable && !challenge.is_empty() && challenge.len() <= MAX_CHALLENGE_CHARS)
        .then(|| challenge.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    // python3 -c 'import hmac,hashlib;print(hmac.new(b"secret",b"body",hashlib.sha256).hexdigest())'
    const SECRET_BODY: &str = "dc46983557fea127b43af721467eb9b3fde2338fe3e14f51952aa8478c13d355";

    #[test]
    fn known_vector() {
        assert_eq!(
            sign_hub(b"secret", b"body"),
            format!("sha256={SECRET_BODY}")
        );
        assert!(hub_signature_valid(
            b"secret",
            b"body",
            Some(&format!("sha256={SECRET_BODY}"))
        ));
        // RFC 4231 test case 2.
        assert_eq!(
            sign_hub(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn hex_case_and_surrounding_whitespace_are_accepted() {
        let upper = format!("sha256={}", SECRET_BODY.to_uppercase());
        assert!(hub_signature_valid(b"secret", b"body", Some(&upper)));
        let mixed = format!(
            "sha256={}{}",
            &SECRET_BODY[..32].to_uppercase(),
            &SECRET_BODY[32..]
        );
        assert!(hub_signature_valid(b"secret", b"body", Some(&mixed)));
        let padded = format!("  sha256={SECRET_BODY} ");
        assert!(hub_signature_valid(b"secret", b"body", Some(&padded)));
    }

    #[test]
    fn anything_else_is_rejected() {
        let good = format!("sha256={SECRET_BODY}");
        let v = |secret: &[u8], body: &[u8], header: Option<&str>| {
            hub_signature_valid(secret, body, header)
        };
        assert!(!v(b"wrong", b"body", Some(&good)), "wrong secret");
        assert!(!v(b"secret", b"body!", Some(&good)), "other body");
        assert!(
            !v(b"", b"body", Some(&sign_hub(b"", b"body"))),
            "empty secret"
        );
        assert!(!v(b"secret", b"body", None), "missing header");
        assert!(!v(b"secret", b"body", Some(SECRET_BODY)), "missing prefix");
        assert!(!v(b"secret", b"body", Some(&format!("sha1={SECRET_BODY}"))));
        assert!(!v(
            b"secret",
            b"body",
            Some(&format!("SHA256={SECRET_BODY}"))
        ));
        assert!(
            !v(b"secret", b"body", Some(&good[..good.len() - 1])),
            "odd length"
        );
        assert!(
            !v(b"secret", b"body", Some(&good[..good.len() - 2])),
            "truncated"
        );
        assert!(
            !v(b"secret", b"body", Some(&format!("{good}00"))),
            "too long"
        );
        assert!(!v(b"secret", b"body", Some(&format!("{good}{good}"))));
        assert!(!v(b"secret", b"body", Some("sha256=")), "empty digest");
        assert!(!v(b"secret", b"body", Some("sha256=zz")), "not hex");
        let non_hex = format!("sha256={}zz", &SECRET_BODY[..62]);
        assert!(!v(b"secret", b"body", Some(&non_hex)));
        assert!(!v(b"secret", b"body", Some("")));
        assert!(!v(b"secret", b"body", Some("sha256=é")));
        let huge = format!("sha256={}", "0".repeat(100_000));
        assert!(!v(b"secret", b"body", Some(&huge)));
    }

    #[test]
    fn subscribe_handshake() {
        let ok = |mode, token, challenge| handshake("vt", mode, token, challenge);
        assert_eq!(
            ok(Some("subscribe"), Some("vt"), Some("1158201444")),
            Some("1158201444".into())
        );
        assert_eq!(ok(Some("unsubscribe"), Some("vt"), Some("1")), None);
        assert_eq!(ok(None, Some("vt"), Some("1")), None);
        assert_eq!(ok(Some("subscribe"), Some("nope"), Some("1")), None);
        assert_eq!(ok(Some("subscribe"), None, Some("1")), None);
        assert_eq!(ok(Some("subscribe"), Some("vt"), None), None);
        assert_eq!(ok(Some("subscribe"), Some("vt"), Some("")), None);
        let max = "~".repeat(MAX_CHALLENGE_CHARS);
        assert_eq!(
            ok(Some("subscribe"), Some("vt"), Some(&max)),
            Some(max.clone())
        );
        let long = "a".repeat(MAX_CHALLENGE_CHARS + 1);
        assert_eq!(ok(Some("subscribe"), Some("vt"), Some(&long)), None);
        for bad in ["a\nb", "<script>\u{7f}", "é", "tab\t", "nul\0"] {
            assert_eq!(
                ok(Some("subscribe"), Some("vt"), Some(bad)),
                None,
                "{bad:?}"
            );
        }
        assert_eq!(
            ok(Some("subscribe"), Some("vt"), Some("a b!~")),
            Some("a b!~".into())
        );
        assert_eq!(handshake("", Some("subscribe"), Some(""), Some("1")), None);
    }
}
