//! Any bytes as a Discord interaction: never panics, and a command read from them names
//! its user, channel and interaction by snowflakes, bounded, with a token to answer on.
#![no_main]

use hermes_channels::MAX_FIELD_BYTES;
use hermes_channels::discord::{self, Interaction};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Interaction::Command(c)) = discord::parse(data) {
        for id in [&c.id, &c.application_id, &c.user_id, &c.channel_id] {
            assert!(!id.is_empty() && id.len() <= 20, "{id}");
            assert!(id.bytes().all(|b| b.is_ascii_digit()), "{id}");
        }
        assert!(!c.token.is_empty());
        assert!(c.user_name.as_ref().is_none_or(|n| n.len() <= MAX_FIELD_BYTES));
    }
});
