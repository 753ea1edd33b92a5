//! Any bytes as the `d` of a Discord Gateway `MESSAGE_CREATE`: never panics, and a routed
//! message is bounded, never the bot's own, and has something to answer.
#![no_main]

use hermes_channels::discord::{BotId, Message, parse_message};
use hermes_channels::{MAX_ATTACHMENTS, MAX_FIELD_BYTES, MAX_TEXT_BYTES};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let bot = BotId::new("9900").expect("a snowflake");
    if let Ok(Message::Routed(m)) = parse_message(data, &bot) {
        let e = &m.event;
        assert!(e.text.is_some() || !e.media.is_empty());
        assert!(e.text.as_ref().is_none_or(|t| t.len() <= MAX_TEXT_BYTES));
        assert!(e.sender_id != bot.as_str() && !e.sender_id.is_empty());
        assert!(e.sender_id.len() <= 20 && e.chat_id.len() <= 20);
        assert!(e.media.len() <= MAX_ATTACHMENTS);
        assert!((e.media.iter()).all(|m| m.url.as_ref().is_some_and(|u| u.len() <= MAX_FIELD_BYTES)));
    }
});
