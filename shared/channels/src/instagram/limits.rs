//! Instagram's message size (the Graph API refuses a text over 1,000 characters,
//! <https://developers.facebook.com/docs/messenger-platform/instagram/features/send-message>);
//! an image attachment takes no caption.

use crate::Limits;

/// One Instagram message: texts of 1,000 characters, no captions.
pub const LIMITS: Limits = Limits {
    max_chars: 1000,
    max_caption: None,
};
