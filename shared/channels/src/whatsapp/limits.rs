//! WhatsApp's message sizes (<https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages>:
//! a text body holds 4,096 characters, an image caption 1,024).

use crate::Limits;

/// One WhatsApp message: text bodies of 4,096 characters, image captions of 1,024.
pub const LIMITS: Limits = Limits {
    max_chars: 4096,
    max_caption: Some(1024),
};
