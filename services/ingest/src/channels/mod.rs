//! Channel webhooks: pure parsers and verifiers for what Telegram, WhatsApp (Cloud API or
//! 360dialog) and Instagram POST to us.
//!
//! Everything here works on the raw request body and headers and nothing else: no I/O, no
//! clocks except as a fallback for a missing timestamp, configuration only as arguments. Every function is
//! total over its input (fuzzed in `fuzz/`): untrusted bytes give `Err` or an empty result,
//! never a panic. Sizes are bounded: message text is cut at [`MAX_TEXT_BYTES`] on a char
//! boundary, other strings (ids, names, URLs, MIME types) at [`MAX_FIELD_BYTES`]. A body with
//! more than [`MAX_ITEMS`] messages (or as many statuses) is refused whole
//! ([`ParseError::TooMany`]): nothing of a verified body is acknowledged and then dropped.
//!
//! - [`telegram::parse`]: one Bot API `Update` → at most one [`MessageEvent`].
//! - [`telegram_groups::admit`]: whether a Telegram group message or edit is answered.
//! - [`whatsapp::parse`]: one Cloud API webhook → messages and delivery statuses.
//! - [`instagram::parse`]: one Instagram Messaging webhook → messages.
//! - [`verify`]: `X-Hub-Signature-256`, the subscribe handshake, token comparison.
//!
//! [`MessageEvent`]: hermes_types::model::MessageEvent

pub mod instagram;
pub mod telegram;
pub mod telegram_groups;
pub mod verify;
pub mod whatsapp;

use chrono::{DateTime, Utc};
use serde::Deserializer;
use serde::de::{Deserialize, DeserializeOwned};
use serde_json::Value;

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

/// Why a webhook body could not be parsed. Both variants are a 400 for the sender and the
/// `malformed` reason on the rejection metric.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Not JSON at all (syntax error, truncated, nested too deep).
    #[error("body is not valid JSON: {0}")]
    Json(String),
    /// JSON, but not the shape this platform sends.
    #[error("{0}")]
    Shape(String),
    /// More items than [`MAX_ITEMS`]: refused whole (413), never truncated.
    #[error("{0} items in one body; at most {MAX_ITEMS} are accepted")]
    TooMany(usize),
}

impl ParseError {
    /// The metric label of this error.
    pub fn reason(&self) -> &'static str {
        match self {
            ParseError::Json(_) | ParseError::Shape(_) => "malformed",
            ParseError::TooMany(_) => "too_large",
        }
    }
}

impl From<serde_json::Error> for ParseError {
    fn from(e: serde_json::Error) -> Self {
        match e.classify() {
            serde_json::error::Category::Data => ParseError::Shape(e.to_string()),
            _ => ParseError::Json(e.to_string()),
        }
    }
}

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

/// Deserializes a whole body, which must be a JSON object, sorting serde's errors into
/// [`ParseError`]'s two kinds. serde_json's recursion limit (128) turns deeply nested input
/// into an error.
pub(crate) fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ParseError> {
    let value = serde_json::from_slice(body).map_err(ParseError::from)?;
    // serde lets a struct be read from an array too; webhooks are objects.
    match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => Ok(value),
        _ => Err(ParseError::Shape("expected a JSON object".into())),
    }
}

/// An integer that may arrive as a JSON number or a numeric string (WhatsApp sends unix
/// timestamps as strings). Anything else — float, bool, garbage — is `None`, not an error.
pub(crate) fn lenient_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(value_i64))
}

fn value_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// An id that may arrive as a JSON string or number; anything else is `None`.
pub(crate) fn lenient_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(match v {
        Some(Value::String(s)) => short_field(Some(s)),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

/// A unix time in seconds; now when absent, non-positive or out of range.
pub(crate) fn from_unix_seconds(secs: Option<i64>) -> DateTime<Utc> {
    secs.filter(|s| *s > 0)
        .and_then(|s| DateTime::from_timestamp(s, 0))
        .unwrap_or_else(Utc::now)
}

/// A unix time in milliseconds; now when absent, non-positive or out of range.
pub(crate) fn from_unix_millis(ms: Option<i64>) -> DateTime<Utc> {
    ms.filter(|m| *m > 0)
        .and_then(DateTime::from_timestamp_millis)
        .unwrap_or_else(Utc::now)
}

/// The text a shared location becomes: `[location] {name} {address} ({lat},{lon})` with
/// whichever parts exist.
pub(crate) fn location_text(
    name: Option<&str>,
    address: Option<&str>,
    latitude: Option<f64>,
    longitude: Option<f64>,
) -> String {
    let mut parts = vec!["[location]".to_owned()];
    for p in [name, address].into_iter().flatten() {
        let p = truncate_utf8(p.trim(), MAX_FIELD_BYTES);
        if !p.is_empty() {
            parts.push(p.to_owned());
        }
    }
    match (latitude, longitude) {
        (Some(lat), Some(lon)) => parts.push(format!("({lat},{lon})")),
        (Some(lat), None) => parts.push(format!("({lat},)")),
        (None, Some(lon)) => parts.push(format!("(,{lon})")),
        (None, None) => {}
    }
    parts.join(" ")
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

    #[test]
    fn timestamps_fall_back_to_now() {
        assert_eq!(
            from_unix_seconds(Some(1_700_000_000)).timestamp(),
            1_700_000_000
        );
        assert_eq!(
            from_unix_millis(Some(1_700_000_000_123)).timestamp_millis(),
            1_700_000_000_123
        );
        let before = Utc::now();
        for t in [
            from_unix_seconds(None),
            from_unix_seconds(Some(0)),
            from_unix_seconds(Some(-5)),
            from_unix_seconds(Some(i64::MAX)),
            from_unix_millis(Some(i64::MAX)),
            from_unix_millis(Some(i64::MIN)),
        ] {
            assert!(t >= before && t <= Utc::now());
        }
    }

    #[test]
    fn location_text_uses_the_parts_that_exist() {
        assert_eq!(
            location_text(Some("Cafe"), Some("1 Main St"), Some(1.5), Some(-2.25)),
            "[location] Cafe 1 Main St (1.5,-2.25)"
        );
        assert_eq!(
            location_text(None, None, Some(1.0), Some(2.0)),
            "[location] (1,2)"
        );
        assert_eq!(location_text(Some(" "), None, None, None), "[location]");
    }

    #[test]
    fn errors_have_kinds_and_one_reason() {
        let e = decode::<Value>(b"{").unwrap_err();
        assert!(matches!(e, ParseError::Json(_)), "{e:?}");
        assert!(e.to_string().starts_with("body is not valid JSON: "));
        let e = decode::<Vec<u8>>(b"{}").unwrap_err();
        assert!(matches!(e, ParseError::Shape(_)), "{e:?}");
        // A struct may be read from an array; a webhook body may not.
        assert!(decode::<Value>(b" {} ").is_ok());
        let e = decode::<Value>(b" [] ").unwrap_err();
        assert!(matches!(e, ParseError::Shape(_)), "{e:?}");
        assert_eq!(e.reason(), "malformed");
        assert_eq!(ParseError::Json(String::new()).reason(), "malformed");
        // Nesting beyond serde_json's recursion limit is an error, not a stack overflow.
        let deep = "[".repeat(10_000);
        assert!(decode::<Value>(deep.as_bytes()).is_err());
    }
}
