//! Any bytes as a Telegram webhook body: never panics, and whatever it routes is bounded.
#![no_main]

use hermes_channels::{MAX_FIELD_BYTES, MAX_TEXT_BYTES, telegram};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(update) = telegram::parse(data)
        && let Some(e) = update.event
    {
        assert!(e.text.is_some() || !e.media.is_empty());
        assert!(e.text.as_ref().is_none_or(|t| t.len() <= MAX_TEXT_BYTES));
        assert!(
            e.sender_name
                .as_ref()
                .is_none_or(|n| n.len() <= MAX_FIELD_BYTES)
        );
        assert!(e.external_message_id.is_some());
    }
});
