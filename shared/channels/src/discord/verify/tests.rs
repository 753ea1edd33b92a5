//! The signature check against signatures made with ring's Ed25519 signer (the e2e tests
//! sign with PyNaCl, the library Discord's docs use).

use http::{HeaderMap, HeaderValue};
use ring::signature::{Ed25519KeyPair, KeyPair};

use super::*;

const NOW: i64 = 1_764_370_000;
const BODY: &[u8] = br#"{"type":1,"id":"1","application_id":"2","token":"t"}"#;

fn pair() -> Ed25519KeyPair {
    Ed25519KeyPair::from_seed_unchecked(&[7; 32]).expect("seed")
}

fn key() -> PublicKey {
    PublicKey::from_hex(&hex::encode(pair().public_key().as_ref())).expect("key")
}

fn headers(timestamp: &str, body: &[u8]) -> HeaderMap {
    let (public, signature) = sign(&[7; 32], timestamp, body).expect("a seed");
    assert_eq!(PublicKey::from_hex(&public), Some(key()));
    let mut h = HeaderMap::new();
    h.insert(SIGNATURE, HeaderValue::from_str(&signature).expect("hex"));
    h.insert(TIMESTAMP, HeaderValue::from_str(timestamp).expect("digits"));
    h
}

#[test]
fn a_body_signed_with_the_key_passes() {
    let h = headers(&NOW.to_string(), BODY);
    assert_eq!(check_headers(Some(&key()), &h), Ok(()));
    assert_eq!(check_body_at(Some(&key()), &h, BODY, NOW), Ok(()));
}

#[test]
fn a_changed_body_or_timestamp_fails() {
    let h = headers(&NOW.to_string(), BODY);
    let changed = br#"{"type":2,"id":"1","application_id":"2","token":"t"}"#;
    assert_eq!(
        check_body_at(Some(&key()), &h, changed, NOW),
        Err(Refusal::BadSignature)
    );
    let mut moved = h.clone();
    moved.insert(TIMESTAMP, HeaderValue::from(NOW + 1));
    assert_eq!(
        check_body_at(Some(&key()), &moved, BODY, NOW),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn another_key_fails() {
    let other = PublicKey::from_hex(&"11".repeat(32)).expect("key");
    let h = headers(&NOW.to_string(), BODY);
    assert_eq!(
        check_body_at(Some(&other), &h, BODY, NOW),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn a_stale_timestamp_fails_even_signed() {
    let old = NOW - REPLAY_WINDOW_SECS - 1;
    let h = headers(&old.to_string(), BODY);
    assert_eq!(
        check_body_at(Some(&key()), &h, BODY, NOW),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn missing_or_malformed_headers_fail_closed() {
    let empty = HeaderMap::new();
    assert_eq!(
        check_headers(Some(&key()), &empty),
        Err(Refusal::BadSignature)
    );
    assert_eq!(
        check_body_at(Some(&key()), &empty, BODY, NOW),
        Err(Refusal::BadSignature)
    );
    let mut h = headers(&NOW.to_string(), BODY);
    h.insert(SIGNATURE, HeaderValue::from_static("zz"));
    assert_eq!(
        check_body_at(Some(&key()), &h, BODY, NOW),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn no_key_is_the_route_off() {
    let h = headers(&NOW.to_string(), BODY);
    assert_eq!(check_headers(None, &h), Err(Refusal::Off));
    assert_eq!(check_body_at(None, &h, BODY, NOW), Err(Refusal::Off));
}

#[test]
fn a_key_is_64_hex_digits() {
    assert!(PublicKey::from_hex(&"ab".repeat(32)).is_some());
    assert!(PublicKey::from_hex(&"ab".repeat(31)).is_none());
    assert!(PublicKey::from_hex("not hex").is_none());
}
