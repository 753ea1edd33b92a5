//! Tokens signed with a test RSA key (`tests/fixtures/teams/test-signing-key.der`, whose
//! public half is `test-jwks.json`), as the Bot Framework signs its own.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::HeaderValue;
use serde_json::{Value, json};

use super::*;
use crate::teams::keys::read_document;

const APP: &str = "c9e8c047-2a74-40a2-b28a-b162d5f5327c";
const NOW: f64 = 1_800_000_000.0;
const SERVICE: &str = "https://smba.trafficmanager.net/amer/";

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/teams/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(path).unwrap()
}

fn keys() -> std::sync::Arc<Keys> {
    Keys::fixed(read_document(&fixture("test-jwks.json")).unwrap())
}

/// `claims` signed with the test key under `header`'s `kid` (and `alg`, which the signature
/// does not change: a token claiming another algorithm is still RS256-signed).
fn sign(header: &Value, claims: &Value) -> String {
    let kid = header["kid"].as_str().unwrap();
    let token = super::sign(&fixture("test-signing-key.der"), kid, claims).unwrap();
    let (_, rest) = token.split_once('.').unwrap();
    format!("{}.{rest}", URL_SAFE_NO_PAD.encode(header.to_string()))
}

fn claims() -> Value {
    json!({
        "iss": ISSUER, "aud": APP, "serviceurl": SERVICE,
        "nbf": NOW - 60.0, "exp": NOW + 3600.0
    })
}

fn header() -> Value {
    json!({"alg": "RS256", "kid": "test-key", "typ": "JWT"})
}

#[test]
fn a_token_of_the_bot_framework_gives_its_service_url() {
    let token = sign(&header(), &claims());
    assert_eq!(
        verify(&keys(), APP, &token, NOW),
        Ok(Some(SERVICE.to_owned()))
    );
    // Within the five minutes of skew either side.
    assert!(verify(&keys(), APP, &token, NOW + 3600.0 + 299.0).is_ok());
    let mut h = HeaderMap::new();
    h.insert(
        http::header::AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
    );
    assert!(check(Some(&keys()), Some(APP), &h, NOW).is_ok());
    assert_eq!(
        check(None, Some(APP), &h, NOW),
        Err(Refusal::Off),
        "no keys configured: the route is off"
    );
    assert_eq!(
        check(Some(&keys()), Some(APP), &HeaderMap::new(), NOW),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn every_other_token_is_refused_for_its_reason() {
    let k = keys();
    let with = |field: &str, value: Value| {
        let mut c = claims();
        c[field] = value;
        sign(&header(), &c)
    };
    let cases = [
        (
            with("iss", json!("https://sts.windows.net/x/")),
            TokenRefusal::Issuer,
        ),
        (with("aud", json!("another-bot")), TokenRefusal::Audience),
        (with("exp", json!(NOW - 301.0)), TokenRefusal::Expired),
        (with("exp", json!("tomorrow")), TokenRefusal::Malformed),
        (with("nbf", json!(NOW + 301.0)), TokenRefusal::FutureDated),
        (
            sign(&json!({"alg": "RS256", "kid": "rolled"}), &claims()),
            TokenRefusal::UnknownKey,
        ),
        (
            sign(&json!({"alg": "HS256", "kid": "test-key"}), &claims()),
            TokenRefusal::Algorithm,
        ),
        ("e30.e30.".to_owned(), TokenRefusal::Algorithm),
        ("not a token".to_owned(), TokenRefusal::Malformed),
    ];
    for (token, why) in cases {
        assert_eq!(verify(&k, APP, &token, NOW), Err(why), "{why:?}");
    }
    let mut c = claims();
    c.as_object_mut().unwrap().remove("exp");
    let no_exp = sign(&header(), &c);
    assert_eq!(verify(&k, APP, &no_exp, NOW), Err(TokenRefusal::Expired));
    // A signature over other claims.
    let good = sign(&header(), &claims());
    let (head, _) = good.split_once('.').unwrap();
    let swapped = format!(
        "{}.{}.{}",
        head,
        with("aud", json!([APP, "x"])).split('.').nth(1).unwrap(),
        good.rsplit('.').next().unwrap()
    );
    assert_eq!(verify(&k, APP, &swapped, NOW), Err(TokenRefusal::Signature));
    // A key endorsed for other channels only.
    let mut other = read_document(&fixture("test-jwks.json")).unwrap();
    other[0].endorsements = vec!["skype".into()];
    assert_eq!(
        verify(&Keys::fixed(other), APP, &good, NOW),
        Err(TokenRefusal::NotEndorsed)
    );
}

#[test]
fn the_claimed_service_must_be_the_activitys() {
    assert!(service_url_matches(
        Some(SERVICE),
        Some("https://smba.trafficmanager.net/amer")
    ));
    assert!(!service_url_matches(
        Some(SERVICE),
        Some("https://evil.example/amer/")
    ));
    assert!(!service_url_matches(None, Some(SERVICE)));
    assert!(!service_url_matches(Some(SERVICE), None));
}
