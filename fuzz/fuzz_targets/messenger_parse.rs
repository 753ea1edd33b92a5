//! Any bytes as a Messenger webhook body: never panics, and the result is bounded.
#![no_main]

use hermes_channels::{MAX_ATTACHMENTS, MAX_FIELD_BYTES, MAX_ITEMS, MAX_TEXT_BYTES, messenger};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(events) = messenger::parse(data) {
        assert!(events.len() <= MAX_ITEMS);
        for e in &events {
            assert_eq!(e.platform.as_str(), "messenger");
            assert!(e.text.is_some() || !e.media.is_empty());
            assert!(e.text.as_ref().is_none_or(|t| t.len() <= MAX_TEXT_BYTES));
            assert!(e.sender_id.len() <= MAX_FIELD_BYTES && !e.sender_id.is_empty());
            assert!(e.media.len() <= MAX_ATTACHMENTS);
        }
    }
});
