//! Slack's message sizes (<https://api.slack.com/methods/chat.postMessage#truncating>): Slack
//! truncates a text beyond 40,000 characters and asks clients to keep messages to 4,000
//! (<https://api.slack.com/changelog/2018-04-truncating-really-long-messages>); an image
//! block's caption is a section of at most 3,000.

use crate::Limits;

/// One Slack message: texts of 4,000 characters, image captions of 3,000.
pub const LIMITS: Limits = Limits {
    max_chars: 4000,
    max_caption: Some(3000),
};
