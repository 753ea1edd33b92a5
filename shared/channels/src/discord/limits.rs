//! Discord's message size: a message's `content` holds at most 2,000 characters
//! (<https://discord.com/developers/docs/resources/message#create-message-jsonform-params>);
//! an image goes as an embed, its caption as the content beside it.

use crate::Limits;

/// One Discord message: texts and image captions of 2,000 characters.
pub const LIMITS: Limits = Limits {
    max_chars: 2000,
    max_caption: Some(2000),
};
