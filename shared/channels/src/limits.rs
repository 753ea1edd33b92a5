//! What one message of a platform holds: each platform's `limits.rs` names its own, and
//! [`crate::parts`] cuts a reply to them (docs/channels.md, "Long replies").

/// The sizes of one message on a platform, in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest text of one message.
    pub max_chars: usize,
    /// The longest caption of a photo; `None` where photos take no caption (the text then
    /// follows as messages of its own).
    pub max_caption: Option<usize>,
}
