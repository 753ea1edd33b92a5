//! Any bytes as a Slack Events API body: never panics, a challenge is printable and bounded,
//! a routed message is bounded and names its conversation.
#![no_main]

use hermes_channels::slack::{self, Request, SlackChat, parse::MAX_CHALLENGE_CHARS};
use hermes_channels::{MAX_ATTACHMENTS, MAX_FIELD_BYTES, MAX_TEXT_BYTES};
use hermes_config::SlackChannelReplies;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for replies in [SlackChannelReplies::Thread, SlackChannelReplies::Channel] {
        match slack::parse(data, replies) {
            Ok(Request::Challenge(c)) => {
                assert!(!c.is_empty() && c.len() <= MAX_CHALLENGE_CHARS);
                assert!(c.bytes().all(|b| (0x20..=0x7e).contains(&b)));
            }
            Ok(Request::Message(m)) => {
                let e = &m.event;
                assert!(e.text.is_some() || !e.media.is_empty());
                assert!(e.text.as_ref().is_none_or(|t| t.len() <= MAX_TEXT_BYTES));
                assert!(e.sender_id.len() <= MAX_FIELD_BYTES && !e.sender_id.is_empty());
                assert!(e.media.len() <= MAX_ATTACHMENTS);
                assert!(SlackChat::parse(&e.chat_id).is_some(), "{}", e.chat_id);
            }
            Ok(Request::Skipped(_)) | Err(_) => {}
        }
    }
});
