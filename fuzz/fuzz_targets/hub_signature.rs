//! Signature checks on arbitrary secret, body and header: never panic, never accept a forged
//! header, always accept what `sign_hub` produced. Also the handshake and token comparison.
//!
//! Input layout: `[secret_len, header_len, secret…, header…, body…]` (lengths are taken
//! modulo what is left, so every input is usable).
#![no_main]

use hermes_channels::meta::verify::{handshake, hub_signature_valid, sign_hub};
use hermes_channels::token::token_matches;
use libfuzzer_sys::fuzz_target;

#[path = "split.rs"]
mod split;
use split::split;

fuzz_target!(|data: &[u8]| {
    let [secret_len, header_len, rest @ ..] = data else {
        return;
    };
    let (secret, rest) = split(rest, *secret_len);
    let (header, body) = split(rest, *header_len);
    let header = String::from_utf8_lossy(header);

    let accepted = hub_signature_valid(secret, body, Some(&header));
    let signed = sign_hub(secret, body);
    if accepted {
        // The only header that verifies is the signature itself (hex in either case).
        assert!(!secret.is_empty());
        assert_eq!(header.trim().to_ascii_lowercase(), signed);
    }
    assert_eq!(
        hub_signature_valid(secret, body, Some(&signed)),
        !secret.is_empty()
    );
    assert!(!hub_signature_valid(secret, body, None));

    let token = String::from_utf8_lossy(secret);
    assert_eq!(
        token_matches(&token, Some(&header)),
        !token.is_empty() && *token == *header
    );
    let challenge = String::from_utf8_lossy(body);
    if let Some(echo) = handshake(&token, Some("subscribe"), Some(&header), Some(&challenge)) {
        assert_eq!(echo, challenge);
        assert!(echo.len() <= 512 && echo.bytes().all(|b| (0x20..=0x7e).contains(&b)));
    }
});
