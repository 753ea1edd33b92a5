//! Any bytes as a Bot Framework activity: never panics, a routed message is bounded, names
//! its conversation on its service, and quotes only the message itself; the service URL the token is
//! compared with is read without a panic too.
#![no_main]

use hermes_channels::teams::{self, Request, TeamsChat};
use hermes_channels::{MAX_ATTACHMENTS, MAX_FIELD_BYTES, MAX_TEXT_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = teams::parse::service_url(data);
    if let Ok(Request::Message(m)) = teams::parse(data) {
        let e = &m.event;
        assert!(e.text.is_some() || !e.media.is_empty());
        assert!(e.text.as_ref().is_none_or(|t| t.len() <= MAX_TEXT_BYTES));
        assert!(e.sender_id.len() <= MAX_FIELD_BYTES && !e.sender_id.is_empty());
        assert!(e.media.len() <= MAX_ATTACHMENTS);
        assert!(TeamsChat::parse(&e.chat_id).is_some(), "{}", e.chat_id);
        // A reply quotes the very message that asked.
        assert!(m.quote.is_none() || m.quote == e.external_message_id);
    }
});
