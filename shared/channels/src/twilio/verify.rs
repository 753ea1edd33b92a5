//! Twilio's webhook authenticity
//! (<https://www.twilio.com/docs/usage/webhooks/webhooks-security#validating-signatures-from-twilio>):
//! `X-Twilio-Signature` is the base64 HMAC-SHA1, keyed with the account's auth token, of the
//! URL Twilio requested followed by every POST parameter's name and value, sorted by name.
//!
//! The URL is the one configured (`TWILIO_WEBHOOK_URL`), never the request's own `Host`: a
//! proxy in front of ingest may rewrite that, and a caller controls it. Twilio is not
//! consistent about a default port in what it signs, so, like its own validators, the URL is
//! tried with and without it. Fails closed: an empty token or a missing header never matches.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha1::Sha1;
use subtle::ConstantTimeEq;
use url::Url;

/// The header Twilio signs a webhook in.
pub const TWILIO_SIGNATURE: &str = "x-twilio-signature";

/// A base64 HMAC-SHA1 is 28 characters; anything much longer is not one.
const MAX_SIGNATURE_CHARS: usize = 64;

/// The form parameters of a body, decoded (`+` as a space, `%XX` escapes), in body order.
pub fn form_params(body: &[u8]) -> Vec<(String, String)> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

/// The signature Twilio sends for a POST of `params` to `url` under `auth_token`: names
/// sorted, and a name's values sorted, each distinct pair once (as Twilio's own libraries
/// compute it).
pub fn signature(auth_token: &[u8], url: &str, params: &[(String, String)]) -> String {
    let mut pairs: Vec<(&str, &str)> = params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = Hmac::<Sha1>::new_from_slice(auth_token).expect("HMAC takes any key");
    mac.update(url.as_bytes());
    for (name, value) in pairs {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    BASE64.encode(mac.finalize().into_bytes())
}

/// Whether `header` is Twilio's signature of `params` posted to `url` (with or without its
/// default port), compared in constant time.
pub fn signature_valid(
    auth_token: &[u8],
    url: &Url,
    params: &[(String, String)],
    header: Option<&str>,
) -> bool {
    let Some(given) = header.map(str::trim) else {
        return false;
    };
    if auth_token.is_empty() || given.is_empty() || given.len() > MAX_SIGNATURE_CHARS {
        return false;
    }
    signed_forms(url).iter().any(|form| {
        let expected = signature(auth_token, form, params);
        bool::from(expected.as_bytes().ct_eq(given.as_bytes()))
    })
}

/// `url` as Twilio may have signed it: as configured, and with its default port written
/// out, or without the port written (the url crate keeps only a port that is not the
/// default, so the configured form is one of the two).
fn signed_forms(url: &Url) -> [String; 2] {
    let plain = url.as_str().to_string();
    let other = match (url.port(), url.port_or_known_default(), url.host_str()) {
        (None, Some(port), Some(host)) => {
            let origin = format!("{}://{host}", url.scheme());
            plain.replacen(&origin, &format!("{origin}:{port}"), 1)
        }
        _ => plain.clone(),
    };
    [plain, other]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of Twilio's own validator tests (twilio-python's `test_request_validator`): this URL, these
    /// parameters and the auth token `12345` sign to this value.
    #[test]
    fn twilios_published_example() {
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        let params: Vec<(String, String)> = [
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+14158675309"),
            ("Digits", "1234"),
            ("From", "+14158675309"),
            ("To", "+18005551212"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            signature(b"12345", url, &params),
            "RSOYDt4T1cUTdK1PDd93/VVr8B8="
        );
        let url = Url::parse(url).unwrap();
        assert!(signature_valid(
            b"12345",
            &url,
            &params,
            Some("RSOYDt4T1cUTdK1PDd93/VVr8B8=")
        ));
        assert!(!signature_valid(
            b"12346",
            &url,
            &params,
            Some("RSOYDt4T1cUTdK1PDd93/VVr8B8=")
        ));
        assert!(!signature_valid(b"", &url, &params, Some("")));
        assert!(!signature_valid(b"12345", &url, &params, None));
        let mut changed = params.clone();
        changed[2].1 = "1235".into();
        assert!(!signature_valid(
            b"12345",
            &url,
            &changed,
            Some("RSOYDt4T1cUTdK1PDd93/VVr8B8=")
        ));
    }

    #[test]
    fn order_of_the_body_does_not_matter_and_the_default_port_may_be_signed() {
        let url = Url::parse("https://hermes.example/webhooks/twilio").unwrap();
        let a = form_params(b"Body=hi+there&From=%2B15550001111&To=%2B15559990000");
        let b = form_params(b"To=%2B15559990000&From=%2B15550001111&Body=hi+there");
        assert_eq!(a[0], ("Body".to_string(), "hi there".to_string()));
        let sig = signature(b"tok", url.as_str(), &a);
        assert_eq!(sig, signature(b"tok", url.as_str(), &b));
        assert!(signature_valid(b"tok", &url, &b, Some(&sig)));
        let with_port = signature(b"tok", "https://hermes.example:443/webhooks/twilio", &a);
        assert!(signature_valid(b"tok", &url, &a, Some(&with_port)));
        let other_path = signature(b"tok", "https://hermes.example/webhooks/other", &a);
        assert!(!signature_valid(b"tok", &url, &a, Some(&other_path)));
        assert!(!signature_valid(
            b"tok",
            &url,
            &a,
            Some(&"A".repeat(10_000))
        ));
    }
}
