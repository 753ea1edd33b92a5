//! Telegram's message sizes (<https://core.telegram.org/bots/api#sendmessage>: a text holds
//! 4,096 characters; <https://core.telegram.org/bots/api#sendphoto>: a caption 1,024).

use crate::Limits;

/// One Telegram message: texts of 4,096 characters, photo captions of 1,024.
pub const LIMITS: Limits = Limits {
    max_chars: 4096,
    max_caption: Some(1024),
};
