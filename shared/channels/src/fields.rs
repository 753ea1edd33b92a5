//! Fields the platforms send loosely, read leniently: numbers that may be strings, ids that
//! may be numbers, unix times that may be missing, the kind of a file by its media type, and
//! the text a shared location becomes.
//! Each is total: a value of the wrong type reads as absent, never as an error that would
//! lose the rest of the body.

use chrono::{DateTime, Utc};
use hermes_types::model::MediaKind;
use serde::Deserializer;
use serde::de::Deserialize;
use serde_json::Value;

use crate::limits::{MAX_FIELD_BYTES, short_field, truncate_utf8};

/// The kind of a file by its media type (`image/png`, …): a document when it names none or
/// another.
pub(crate) fn media_kind(mime: Option<&str>) -> MediaKind {
    match mime.and_then(|m| m.split('/').next()) {
        Some("image") => MediaKind::Image,
        Some("audio") => MediaKind::Audio,
        Some("video") => MediaKind::Video,
        _ => MediaKind::Document,
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
}
