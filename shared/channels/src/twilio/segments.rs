//! SMS segments (<https://www.twilio.com/docs/glossary/what-sms-character-limit>): a text
//! written wholly in the GSM-7 alphabet goes as 7-bit characters, 160 to a single message or
//! 153 to each segment of a longer one (the rest holds the concatenation header), where the
//! extension characters (`^{}\[~]|€` and form feed) take two; any other character makes the
//! whole message UCS-2, 70 UTF-16 units alone or 67 to a segment. A character never straddles
//! two segments. A reply is cut into messages of at most `[channels.sms] max_segments`
//! segments each, on the same boundaries as every platform's long replies.

use crate::Limits;
use crate::parts::{self, Part};

/// How an SMS is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// The GSM 03.38 7-bit alphabet.
    Gsm7,
    /// UTF-16 (UCS-2 with surrogate pairs).
    Ucs2,
}

impl Encoding {
    /// Units of a message sent alone.
    fn single(self) -> usize {
        match self {
            Encoding::Gsm7 => 160,
            Encoding::Ucs2 => 70,
        }
    }

    /// Units of one segment of a concatenated message.
    fn segment(self) -> usize {
        match self {
            Encoding::Gsm7 => 153,
            Encoding::Ucs2 => 67,
        }
    }

    /// Units `c` takes.
    fn units(self, c: char) -> usize {
        match self {
            Encoding::Gsm7 if is_gsm7_extension(c) => 2,
            Encoding::Gsm7 => 1,
            Encoding::Ucs2 => c.len_utf16(),
        }
    }
}

/// The GSM 03.38 basic alphabet (without the escape).
const GSM7_BASIC: &str = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";

/// The GSM 03.38 extension table: each is the escape and itself, two septets.
fn is_gsm7_extension(c: char) -> bool {
    matches!(
        c,
        '^' | '{' | '}' | '\\' | '[' | '~' | ']' | '|' | '€' | '\u{c}'
    )
}

/// The encoding `text` needs.
pub fn encoding(text: &str) -> Encoding {
    if text
        .chars()
        .all(|c| is_gsm7_extension(c) || GSM7_BASIC.contains(c))
    {
        Encoding::Gsm7
    } else {
        Encoding::Ucs2
    }
}

/// How many segments `text` is sent as (0 for an empty text).
pub fn segments(text: &str) -> usize {
    let enc = encoding(text);
    let total: usize = text.chars().map(|c| enc.units(c)).sum();
    if total == 0 {
        return 0;
    }
    if total <= enc.single() {
        return 1;
    }
    // Greedy, as the handset's concatenation does: a character that does not fit in what is
    // left of a segment opens the next one.
    let (mut count, mut used) = (1, 0);
    for c in text.chars() {
        let u = enc.units(c);
        if used + u > enc.segment() {
            count += 1;
            used = 0;
        }
        used += u;
    }
    count
}

/// The messages a reply becomes on SMS: texts (and one image as an MMS with the text as
/// its body, where it fits), each at most `max_segments` segments.
pub fn sms_parts(text: &str, max_segments: usize) -> Vec<Part> {
    let max_segments = max_segments.max(1);
    let enc = encoding(text);
    // Characters are at least one unit each, so this many never fits fewer segments than
    // allowed; extension characters and surrogate pairs may make a part too long, and the
    // limit then shrinks until every part fits.
    let mut limit = if max_segments == 1 {
        enc.single()
    } else {
        enc.segment() * max_segments
    };
    loop {
        let limits = Limits {
            max_chars: limit,
            max_caption: Some(limit),
        };
        let parts = parts::parts(text, limits);
        let fits = parts.iter().all(|p| match p {
            Part::Text(t) => segments(t) <= max_segments,
            Part::Image { caption, .. } => caption
                .as_deref()
                .is_none_or(|c| segments(c) <= max_segments),
        });
        if fits || limit == 1 {
            return parts;
        }
        limit = (limit * 9 / 10).max(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gsm7_and_ucs2_count_as_twilio_documents() {
        assert_eq!(encoding("Hello, World!"), Encoding::Gsm7);
        assert_eq!(encoding("Hello {you} €5"), Encoding::Gsm7);
        assert_eq!(encoding("héllo"), Encoding::Gsm7, "é is in GSM-7");
        assert_eq!(encoding("hêllo"), Encoding::Ucs2, "ê is not");
        assert_eq!(encoding("hi 👋"), Encoding::Ucs2);
        assert_eq!(segments(""), 0);
        assert_eq!(segments(&"a".repeat(160)), 1);
        assert_eq!(segments(&"a".repeat(161)), 2);
        assert_eq!(segments(&"a".repeat(306)), 2);
        assert_eq!(segments(&"a".repeat(307)), 3);
        // An extension character takes two septets.
        assert_eq!(segments(&"{".repeat(80)), 1);
        assert_eq!(segments(&"{".repeat(81)), 2);
        assert_eq!(segments(&"ж".repeat(70)), 1);
        assert_eq!(segments(&"ж".repeat(71)), 2);
        assert_eq!(segments(&"ж".repeat(134)), 2);
        assert_eq!(segments(&"ж".repeat(135)), 3);
        // A surrogate pair never straddles two segments: 33 emoji fill 66 units of 67.
        assert_eq!(segments(&"😀".repeat(35)), 1);
        assert_eq!(segments(&"😀".repeat(36)), 2);
        assert_eq!(
            segments(&format!("{}{}", "😀".repeat(33), "😀".repeat(34))),
            3
        );
    }

    #[test]
    fn a_long_reply_goes_as_messages_of_at_most_the_configured_segments() {
        let words = "The quick brown fox jumps over the lazy dog. ".repeat(40);
        for max in [1, 2, 4, 10] {
            let parts = sms_parts(&words, max);
            assert!(parts.len() > 1 || max == 10, "{max}: {}", parts.len());
            for p in &parts {
                let Part::Text(t) = p else { panic!("{p:?}") };
                assert!(segments(t) <= max, "{max}: {} segments", segments(t));
            }
            let joined: String = parts
                .iter()
                .map(|p| match p {
                    Part::Text(t) => t.as_str(),
                    Part::Image { .. } => "",
                })
                .collect::<Vec<_>>()
                .join(" ");
            assert_eq!(
                joined.split_whitespace().collect::<Vec<_>>(),
                words.split_whitespace().collect::<Vec<_>>()
            );
        }
        let unicode = "Привет, мир! {€} ".repeat(30);
        for p in sms_parts(&unicode, 2) {
            let Part::Text(t) = p else { panic!() };
            assert!(segments(&t) <= 2);
        }
        let braces = "{}".repeat(400);
        for p in sms_parts(&braces, 1) {
            let Part::Text(t) = p else { panic!() };
            assert!(segments(&t) <= 1, "{}", t.len());
        }
        assert_eq!(sms_parts("short", 1), vec![Part::Text("short".into())]);
    }
}
