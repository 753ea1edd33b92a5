//! The limits of the channels, both ways.
//!
//! In: how much of an untrusted webhook body is kept (docs/channels.md, "Inbound webhooks"):
//! message text is cut at [`MAX_TEXT_BYTES`] on a char boundary, other strings (ids, names,
//! URLs, MIME types) at [`MAX_FIELD_BYTES`]. A body with more than [`MAX_ITEMS`] messages (or
//! as many statuses) is refused whole ([`crate::ParseError::TooMany`]): nothing of a verified
//! body is acknowledged and then dropped.
//!
//! Out: what one message of a platform holds ([`Limits`]): each platform's `limits.rs` names
//! its own, and [`crate::parts`] cuts a reply to them (docs/channels.md, "Long replies").

/// The sizes of one message on a platform, in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest text of one message.
    pub max_chars: usize,
    /// The longest caption of a photo; `None` where photos take no caption (the text then
    /// follows as messages of its own).
    pub max_caption: Option<usize>,
}

/// Message text longer than this many bytes is cut (at a char boundary).
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// Ids, names, URLs and MIME types longer than this many bytes are cut (at a char boundary).
pub const MAX_FIELD_BYTES: usize = 4 * 1024;
/// The most messages, and separately the most statuses, one body may carry: well above what
/// a platform puts in one webhook (Meta's bodies stop at 3 MB, about 10,000 of the smallest
/// items), so only a body no platform sends is refused.
pub const MAX_ITEMS: usize = 20_000;
/// The most attachments one message may carry.
pub const MAX_ATTACHMENTS: usize = 100;

/// The longest prefix of `s` that is at most `max_bytes` long and ends on a char boundary.
pub fn truncate_utf8(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut end = max_bytes;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

/// `s` cut to at most `max_bytes` (char-boundary safe), without copying when it fits.
pub(crate) fn bounded(s: String, max_bytes: usize) -> String {
    if s.len() <= max_bytes {
        s
    } else {
        truncate_utf8(&s, max_bytes).to_owned()
    }
}

/// Message text: `None` when absent or empty, else cut at [`MAX_TEXT_BYTES`].
pub(crate) fn text_field(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
        .map(|s| bounded(s, MAX_TEXT_BYTES))
}

/// An id, name, URL or MIME type: `None` when absent or empty, else cut at
/// [`MAX_FIELD_BYTES`].
pub(crate) fn short_field(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
        .map(|s| bounded(s, MAX_FIELD_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate_utf8("hello", 10), "hello");
        assert_eq!(truncate_utf8("hello", 5), "hello");
        assert_eq!(truncate_utf8("hello", 3), "hel");
        assert_eq!(truncate_utf8("hello", 0), "");
        // 'é' is 2 bytes, '😀' is 4.
        assert_eq!(truncate_utf8("éé", 3), "é");
        assert_eq!(truncate_utf8("a😀", 4), "a");
        assert_eq!(truncate_utf8("a😀", 5), "a😀");
        assert_eq!(truncate_utf8("😀", 3), "");
        // A combining accent after 'e': the cut may separate them, never split a char.
        assert_eq!(truncate_utf8("e\u{301}", 2), "e");
        let long = "😀".repeat(MAX_TEXT_BYTES);
        let t = text_field(Some(long)).unwrap();
        assert_eq!(t.len(), MAX_TEXT_BYTES);
        assert!(t.chars().all(|c| c == '😀'));
    }

    #[test]
    fn empty_fields_are_none() {
        assert_eq!(text_field(Some(String::new())), None);
        assert_eq!(short_field(Some(String::new())), None);
        assert_eq!(short_field(None), None);
        assert_eq!(
            short_field(Some("x".repeat(10_000))).unwrap().len(),
            MAX_FIELD_BYTES
        );
    }
}
