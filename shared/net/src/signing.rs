//! HMAC-SHA256 webhook signatures, both directions: the `sha256=<hex>` tags Meta sends
//! (checked by ingest) and the signed wake webhooks Hermes sends to agent runtimes
//! (docs/agents.md: `X-Forge-*` headers; Standard Webhooks headers for agents that ask).
//!
//! Forge signatures key the HMAC with the secret's bytes as written. Standard Webhooks
//! secrets are `whsec_<base64>` and the key is the decoded bytes; a secret without that
//! form keys the HMAC with its own bytes, so every agent can be offered both shapes.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const SHA256_PREFIX: &str = "sha256=";
/// `sha256=` and 64 hex digits, with room for surrounding whitespace.
const MAX_SHA256_HEADER: usize = 128;
/// The prefix of a Standard Webhooks secret.
pub const WHSEC_PREFIX: &str = "whsec_";

/// Header: Unix seconds at signing (`X-Forge-Timestamp`).
pub const FORGE_TIMESTAMP: &str = "X-Forge-Timestamp";
/// Header: `sha256=<hex>` over `"{timestamp}.{raw body}"`.
pub const FORGE_SIGNATURE: &str = "X-Forge-Signature";
/// Header: `sha256=<hex>` over the raw body alone.
pub const FORGE_BODY_SIGNATURE: &str = "X-Forge-Body-Signature";
/// Header: the event name (`AGENT_ASSIGNED`).
pub const FORGE_EVENT: &str = "X-Forge-Event";
/// Header: the delivery id, the same on every retry of one wake.
pub const FORGE_DELIVERY: &str = "X-Forge-Delivery";
/// Standard Webhooks header: the message id (stable across retries).
pub const WEBHOOK_ID: &str = "webhook-id";
/// Standard Webhooks header: Unix seconds at signing.
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
/// Standard Webhooks header: `v1,<base64>` over `"{id}.{timestamp}.{body}"`.
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";

/// HMAC-SHA256 of the concatenated `parts` under `key`.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// `sha256=<lowercase hex>` of HMAC-SHA256(`key`, `body`).
pub fn sha256_tag(key: &[u8], body: &[u8]) -> String {
    format!("{SHA256_PREFIX}{}", hex::encode(hmac_sha256(key, &[body])))
}

/// Whether `header` (`sha256=<hex>`, any hex case) is the HMAC-SHA256 of `body` under `key`,
/// compared in constant time. `false` when the header is missing or malformed, or the key is
/// empty (unconfigured): this fails closed.
pub fn sha256_tag_valid(key: &[u8], body: &[u8], header: Option<&str>) -> bool {
    sha256_tag_valid_over(key, &[body], header)
}

/// Whether `header` (`sha256=<hex>`) is the HMAC-SHA256 of the concatenated `parts` under
/// `key`, compared in constant time; fails closed as [`sha256_tag_valid`]. A Forge's
/// timestamped signature covers `["{timestamp}", ".", raw body]` without copying the body.
pub fn sha256_tag_valid_over(key: &[u8], parts: &[&[u8]], header: Option<&str>) -> bool {
    let Some(header) = header else { return false };
    if key.is_empty() || header.len() > MAX_SHA256_HEADER {
        return false;
    }
    let Some(hex_digest) = header.trim().strip_prefix(SHA256_PREFIX) else {
        return false;
    };
    let Ok(tag) = hex::decode(hex_digest) else {
        return false;
    };
    let Ok(mut mac) = HmacSha256::new_from_slice(key) else {
        return false;
    };
    for part in parts {
        mac.update(part);
    }
    // Checks the length too: a truncated tag does not verify.
    mac.verify_slice(&tag).is_ok()
}

/// The key a Standard Webhooks signature uses: the decoded bytes of a `whsec_<base64>`
/// secret, else the secret's own bytes.
pub fn standard_key(secret: &[u8]) -> Vec<u8> {
    std::str::from_utf8(secret)
        .ok()
        .and_then(|s| s.strip_prefix(WHSEC_PREFIX))
        .and_then(|b64| BASE64.decode(b64).ok())
        .unwrap_or_else(|| secret.to_vec())
}

/// `v1,<base64>`: the Standard Webhooks signature of `body` for message `id` at `timestamp`.
pub fn standard_signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let ts = timestamp.to_string();
    let tag = hmac_sha256(key, &[id.as_bytes(), b".", ts.as_bytes(), b".", body]);
    format!("v1,{}", BASE64.encode(tag))
}

/// Longest `webhook-signature` header read: a few `v1,<base64>` entries (a sender rotating
/// its secret signs with both).
const MAX_STANDARD_HEADER: usize = 1024;

/// Whether `header` (`webhook-signature`: space-separated `v1,<base64>` entries) holds the
/// Standard Webhooks signature of `body` for message `id` at `timestamp` under `key`, each
/// entry compared in constant time. Fails closed: an empty key, an oversized header or no
/// `v1` entry is `false`. The caller checks the timestamp's age.
pub fn standard_signature_valid(
    key: &[u8],
    id: &str,
    timestamp: i64,
    body: &[u8],
    header: &str,
) -> bool {
    if key.is_empty() || header.len() > MAX_STANDARD_HEADER {
        return false;
    }
    let ts = timestamp.to_string();
    header.split_ascii_whitespace().any(|entry| {
        let Some(b64) = entry.strip_prefix("v1,") else {
            return false;
        };
        let (Ok(tag), Ok(mut mac)) = (BASE64.decode(b64), HmacSha256::new_from_slice(key)) else {
            return false;
        };
        for part in [id.as_bytes(), b".", ts.as_bytes(), b".", body] {
            mac.update(part);
        }
        mac.verify_slice(&tag).is_ok()
    })
}

/// A Standard Webhooks secret made of `raw` (random bytes the caller drew): `whsec_<base64>`.
pub fn standard_secret(raw: &[u8]) -> String {
    format!("{WHSEC_PREFIX}{}", BASE64.encode(raw))
}

/// The three Standard Webhooks headers (`webhook-id`, `webhook-timestamp`,
/// `webhook-signature`) of a message `id` carrying `body` at `timestamp`, signed with `secret`.
pub fn standard_headers(
    secret: &[u8],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> [(&'static str, String); 3] {
    [
        (WEBHOOK_ID, id.to_string()),
        (WEBHOOK_TIMESTAMP, timestamp.to_string()),
        (
            WEBHOOK_SIGNATURE,
            standard_signature(&standard_key(secret), id, timestamp, body),
        ),
    ]
}

/// What a wake webhook is signed for: which event, which delivery, when.
pub struct WakeSigning<'a> {
    pub event: &'a str,
    /// `X-Forge-Delivery` and `webhook-id`: the same on every retry.
    pub delivery_id: &'a str,
    /// Unix seconds; fresh on every attempt so a receiver's tolerance check passes.
    pub timestamp: i64,
    /// Also send the Standard Webhooks headers.
    pub standard: bool,
}

/// The headers of a signed wake webhook carrying `body`, signed with `secret`.
pub fn wake_headers(
    secret: &[u8],
    s: &WakeSigning<'_>,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let ts = s.timestamp.to_string();
    let mut headers = vec![
        (FORGE_TIMESTAMP, ts.clone()),
        (
            FORGE_SIGNATURE,
            format!(
                "{SHA256_PREFIX}{}",
                hex::encode(hmac_sha256(secret, &[ts.as_bytes(), b".", body]))
            ),
        ),
        (FORGE_BODY_SIGNATURE, sha256_tag(secret, body)),
        (FORGE_EVENT, s.event.to_string()),
        (FORGE_DELIVERY, s.delivery_id.to_string()),
    ];
    if s.standard {
        headers.extend(standard_headers(secret, s.delivery_id, s.timestamp, body));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(h: &'a [(&'static str, String)], name: &str) -> Option<&'a str> {
        h.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn a_standard_signature_verifies_only_for_its_own_message() {
        let key = standard_key(b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let (id, ts, body) = (
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        );
        let good = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert!(standard_signature_valid(&key, id, ts, body, good));
        // A rotating sender lists both signatures; either verifies.
        assert!(standard_signature_valid(
            &key,
            id,
            ts,
            body,
            &format!("v1,AAAA {good}")
        ));
        for (k, i, t, b, h) in [
            (&key[..], "msg_other", ts, &body[..], good),
            (&key[..], id, ts + 1, &body[..], good),
            (&key[..], id, ts, &b"{}"[..], good),
            (
                &key[..],
                id,
                ts,
                &body[..],
                "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            ),
            (&key[..], id, ts, &body[..], "v1,not base64!"),
            (&key[..], id, ts, &body[..], ""),
            (&[][..], id, ts, &body[..], good),
        ] {
            assert!(!standard_signature_valid(k, i, t, b, h), "{i} {t} {h:?}");
        }
        assert!(!standard_signature_valid(
            &key,
            id,
            ts,
            body,
            &"v1,x ".repeat(300)
        ));
    }

    #[test]
    fn standard_webhooks_published_vector_reproduces() {
        // The specification's published test vector: a receiver's library accepts ours only
        // if the delimiter, the key decoding and the base64 alphabet are all exactly right.
        let key = standard_key(b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        assert_eq!(
            standard_signature(
                &key,
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        // The same bytes keyed with the undecoded secret give something else.
        assert_ne!(
            standard_signature(
                b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                1_614_265_330,
                br#"{"test": 2432232314}"#
            ),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn forge_signatures_cover_timestamp_and_body() {
        let body = br#"{"kind":"AGENT_ASSIGNED"}"#;
        let s = WakeSigning {
            event: "AGENT_ASSIGNED",
            delivery_id: "dlv_1",
            timestamp: 1_714_080_000,
            standard: false,
        };
        let h = wake_headers(b"secret", &s, body);
        assert_eq!(header(&h, FORGE_TIMESTAMP), Some("1714080000"));
        assert_eq!(header(&h, FORGE_EVENT), Some("AGENT_ASSIGNED"));
        assert_eq!(header(&h, FORGE_DELIVERY), Some("dlv_1"));
        let signed = [b"1714080000.".as_slice(), body].concat();
        assert!(sha256_tag_valid(
            b"secret",
            &signed,
            header(&h, FORGE_SIGNATURE)
        ));
        assert!(sha256_tag_valid_over(
            b"secret",
            &[b"1714080000", b".", body],
            header(&h, FORGE_SIGNATURE)
        ));
        assert!(!sha256_tag_valid_over(
            b"secret",
            &[b"1714080001", b".", body],
            header(&h, FORGE_SIGNATURE)
        ));
        assert!(sha256_tag_valid(
            b"secret",
            body,
            header(&h, FORGE_BODY_SIGNATURE)
        ));
        assert!(!sha256_tag_valid(
            b"other",
            body,
            header(&h, FORGE_BODY_SIGNATURE)
        ));
        assert!(header(&h, WEBHOOK_SIGNATURE).is_none(), "not asked for");
        // Known answer (RFC 4231-style check that the hex is HMAC-SHA256, not a hash).
        assert_eq!(
            sha256_tag(b"key", b"The quick brown fox jumps over the lazy dog"),
            "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
    }

    #[test]
    fn standard_headers_when_asked() {
        let s = WakeSigning {
            event: "AGENT_ASSIGNED",
            delivery_id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
            timestamp: 1_614_265_330,
            standard: true,
        };
        let h = wake_headers(
            b"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            &s,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(header(&h, WEBHOOK_ID), Some("msg_p5jXN8AQM9LWM0D4loKWxJek"));
        assert_eq!(header(&h, WEBHOOK_TIMESTAMP), Some("1614265330"));
        assert_eq!(
            header(&h, WEBHOOK_SIGNATURE),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }

    #[test]
    fn malformed_or_unkeyed_tags_fail_closed() {
        let tag = sha256_tag(b"k", b"body");
        assert!(sha256_tag_valid(b"k", b"body", Some(&tag)));
        assert!(sha256_tag_valid(
            b"k",
            b"body",
            Some(&tag.to_uppercase().replace("SHA256=", "sha256="))
        ));
        assert!(!sha256_tag_valid(
            b"",
            b"body",
            Some(&sha256_tag(b"", b"body"))
        ));
        assert!(!sha256_tag_valid(b"k", b"body", None));
        assert!(!sha256_tag_valid(
            b"k",
            b"body",
            Some(&tag[..tag.len() - 2])
        ));
        assert!(!sha256_tag_valid(b"k", b"body", Some("md5=00")));
    }
}
