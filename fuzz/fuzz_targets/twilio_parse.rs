//! Any bytes as a Twilio webhook body: the signature check and the parser never panic, a
//! signature computed over the body always verifies, and the result is bounded.
#![no_main]

use hermes_channels::twilio::{parse, verify};
use hermes_channels::{MAX_ATTACHMENTS, MAX_FIELD_BYTES, MAX_TEXT_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let params = verify::form_params(data);
    let url = url::Url::parse("https://hermes.example/webhooks/twilio").unwrap();
    let signed = verify::signature(b"token", url.as_str(), &params);
    assert!(verify::signature_valid(b"token", &url, &params, Some(&signed)));
    assert!(!verify::signature_valid(b"other", &url, &params, Some(&signed)));
    let received = parse::parse(&params, Some("help"));
    assert!(received.messages.len() + received.statuses.len() + received.consents.len() <= 1);
    for m in &received.messages {
        let e = &m.event;
        assert!(e.text.is_some() || !e.media.is_empty());
        assert!(e.text.as_ref().is_none_or(|t| t.len() <= MAX_TEXT_BYTES));
        assert!(!e.sender_id.is_empty() && e.sender_id.len() <= MAX_FIELD_BYTES);
        assert!(e.media.len() <= MAX_ATTACHMENTS);
    }
    assert!(received.answer.is_some(), "Twilio is always answered with TwiML");
});
