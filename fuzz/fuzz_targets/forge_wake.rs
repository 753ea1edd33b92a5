//! A Forge wake (docs/agents.md, "Hermes as a Forge agent") on arbitrary secret, signature,
//! timestamp and body: the signature check never panics, never accepts a signature other than
//! the real one, always accepts what `sign` produced within the tolerance; the envelope parser
//! never panics and routes only by a bounded, lower-case profile key.
//!
//! Input layout: `[secret_len, signature_len, timestamp_len, secret…, signature…,
//! timestamp…, body…]` (lengths are taken modulo what is left, so every input is usable).
#![no_main]

use hermes_ingest::forge::verify::{Scheme, TOLERANCE_SECS, check, sign};
use hermes_ingest::forge::wake::parse;
use libfuzzer_sys::fuzz_target;

#[path = "split.rs"]
mod split;
use split::split;

/// The server's clock in the target: fixed, so a timestamp's staleness is reproducible.
const NOW: i64 = 1_714_080_000;

fuzz_target!(|data: &[u8]| {
    let [secret_len, signature_len, timestamp_len, rest @ ..] = data else {
        return;
    };
    let (secret, rest) = split(rest, *secret_len);
    let (signature, rest) = split(rest, *signature_len);
    let (timestamp, body) = split(rest, *timestamp_len);
    let signature = String::from_utf8_lossy(signature);
    let timestamp = String::from_utf8_lossy(timestamp);
    let keys = [secret];

    let checked = check(
        Scheme::Timestamped,
        &keys,
        Some(&signature),
        Some(&timestamp),
        body,
        NOW,
    );
    let real = sign(secret, &timestamp, body);
    if checked.is_ok() {
        // Only the real signature verifies, and only for a fresh timestamp.
        assert!(!secret.is_empty());
        assert_eq!(signature.trim().to_ascii_lowercase(), real);
        let ts: i64 = timestamp
            .trim()
            .parse()
            .expect("a verified timestamp parses");
        assert!(NOW.abs_diff(ts) <= TOLERANCE_SECS.unsigned_abs());
    }
    // What a Forge signs now verifies (with any non-empty secret).
    let now = NOW.to_string();
    assert_eq!(
        check(
            Scheme::Timestamped,
            &keys,
            Some(&sign(secret, &now, body)),
            Some(&now),
            body,
            NOW
        )
        .is_ok(),
        !secret.is_empty()
    );
    // The body-only scheme (proxied paths) fails closed without a secret, too.
    if check(Scheme::BodyOnly, &keys, Some(&signature), None, body, NOW).is_ok() {
        assert!(!secret.is_empty());
    }
    assert!(check(Scheme::Timestamped, &keys, None, Some(&now), body, NOW).is_err());

    if let Ok(wake) = parse(body, Some(&timestamp)) {
        assert!(!wake.profile_key.is_empty() && wake.profile_key.len() <= 128);
        assert_eq!(wake.profile_key, wake.profile_key.to_ascii_lowercase());
        assert!(wake.envelope.is_object());
    }
});
