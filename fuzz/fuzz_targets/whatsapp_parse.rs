//! Any bytes as a WhatsApp Cloud API webhook body: never panics, and the batch is bounded.
#![no_main]

use hermes_channels::statuses::MAX_ERROR_TITLE_CHARS;
use hermes_channels::{MAX_FIELD_BYTES, MAX_ITEMS, MAX_TEXT_BYTES, whatsapp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = whatsapp::parse(data) {
        assert!(batch.messages.len() <= MAX_ITEMS && batch.statuses.len() <= MAX_ITEMS);
        for e in &batch.messages {
            assert!(e.text.is_some() || !e.media.is_empty());
            assert!(e.text.as_ref().is_none_or(|t| t.len() <= MAX_TEXT_BYTES));
            assert!(e.sender_id.len() <= MAX_FIELD_BYTES && !e.sender_id.is_empty());
            assert_eq!(e.sender_id, e.chat_id);
        }
        for s in &batch.statuses {
            assert!(!s.platform_message_id.is_empty());
            assert!(s.platform_message_id.len() <= MAX_FIELD_BYTES);
            let title = s.error_title.as_ref();
            assert!(title.is_none_or(|t| t.chars().count() <= MAX_ERROR_TITLE_CHARS));
        }
    }
});
