//! The REST channel's message (docs/api.md, "The REST channel"): the body of
//! `POST /v1/messages` read and checked into a [`MessageEvent`], every field bounded, or
//! refused with what is wrong. The caller is a customer's own app, so a refusal names the
//! field and the limit; nothing is cut silently.

use hermes_types::model::{Media, MediaKind, MessageEvent, Platform};
use serde::Deserialize;
use serde_json::Value;

/// The longest text of one message, in bytes.
pub const MAX_TEXT: usize = 64 * 1024;
/// The longest `sender_id` and `message_id`, in bytes.
pub const MAX_ID: usize = 128;
/// The largest `metadata` object, serialized, in bytes.
pub const MAX_METADATA: usize = 16 * 1024;

/// Why a REST message was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RestError {
    /// Not JSON, or not a message's shape (unknown fields are refused).
    #[error("body is not a message: {0}")]
    NotAMessage(String),
    /// A message, but a field is missing, too long or not what it must be.
    #[error("{0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestMessage {
    sender_id: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    media_url: Option<String>,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
    /// The caller's own id for this message: a repeat within 24 h is not routed again.
    #[serde(default)]
    message_id: Option<String>,
}

fn invalid(message: impl Into<String>) -> RestError {
    RestError::Invalid(message.into())
}

/// Whether `s` can be an id: 1 to [`MAX_ID`] bytes, no control characters.
fn printable_id(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_ID && !s.chars().any(char::is_control)
}

/// The body of `POST /v1/messages` as a message from its sender.
pub fn parse(body: &[u8]) -> Result<MessageEvent, RestError> {
    let m: RestMessage =
        serde_json::from_slice(body).map_err(|e| RestError::NotAMessage(e.to_string()))?;
    let sender = m.sender_id.trim();
    if !printable_id(sender) {
        return Err(invalid("sender_id must be 1-128 printable characters"));
    }
    if m.message_id.as_deref().is_some_and(|id| !printable_id(id)) {
        return Err(invalid("message_id must be 1-128 printable characters"));
    }
    let text = m.text.filter(|t| !t.trim().is_empty());
    if text.as_ref().is_some_and(|t| t.len() > MAX_TEXT) {
        return Err(invalid(format!("text is longer than {MAX_TEXT} bytes")));
    }
    let media = media(m.media_url, m.media_type)?;
    if text.is_none() && media.is_empty() {
        return Err(invalid("a message needs text or a media_url"));
    }
    if let Some(meta) = &m.metadata
        && (!meta.is_object() || meta.to_string().len() > MAX_METADATA)
    {
        return Err(invalid("metadata must be a JSON object of at most 16 KiB"));
    }
    Ok(MessageEvent {
        platform: Platform::Rest,
        sender_id: sender.to_string(),
        chat_id: sender.to_string(),
        text,
        media,
        external_message_id: m.message_id,
        sender_name: None,
        received_at: chrono::Utc::now(),
        metadata: m.metadata,
    })
}

/// The message's one file, by URL (fetched later through the SSRF guard, never here).
fn media(url: Option<String>, kind: Option<String>) -> Result<Vec<Media>, RestError> {
    let Some(url) = url else {
        return match kind {
            Some(_) => Err(invalid("media_type needs a media_url")),
            None => Ok(Vec::new()),
        };
    };
    let parsed = url::Url::parse(&url).map_err(|_| invalid("media_url is not a URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid("media_url must be http or https"));
    }
    let kind = match kind.as_deref().unwrap_or("image") {
        "image" => MediaKind::Image,
        "document" => MediaKind::Document,
        "audio" => MediaKind::Audio,
        "voice" => MediaKind::Voice,
        "video" => MediaKind::Video,
        other => {
            return Err(invalid(format!(
                "media_type {other:?} is not one of image, document, audio, voice, video"
            )));
        }
    };
    Ok(vec![Media {
        kind,
        platform_id: None,
        url: Some(url),
        mime_type: None,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_needs_a_sender_and_text_or_a_file() {
        let ok = parse(br#"{"sender_id":" u1 ","text":"hi","message_id":"m1"}"#).unwrap();
        assert_eq!((ok.sender_id.as_str(), ok.chat_id.as_str()), ("u1", "u1"));
        assert_eq!(ok.external_message_id.as_deref(), Some("m1"));
        assert!(matches!(
            parse(br#"{"sender_id":"u1","text":"  "}"#),
            Err(RestError::Invalid(_))
        ));
        assert!(matches!(
            parse(br#"{"sender_id":"","text":"hi"}"#),
            Err(RestError::Invalid(_))
        ));
        assert!(matches!(
            parse(br#"{"sender_id":"u1","text":"hi","extra":1}"#),
            Err(RestError::NotAMessage(_))
        ));
        assert!(matches!(parse(b"not json"), Err(RestError::NotAMessage(_))));
    }

    #[test]
    fn a_file_is_an_http_url_of_a_known_kind() {
        let m =
            parse(br#"{"sender_id":"u1","media_url":"https://x.test/a.ogg","media_type":"voice"}"#)
                .unwrap();
        assert_eq!(m.media[0].kind, MediaKind::Voice);
        for bad in [
            r#"{"sender_id":"u1","media_url":"file:///etc/passwd"}"#,
            r#"{"sender_id":"u1","media_url":"https://x.test/a","media_type":"gif"}"#,
            r#"{"sender_id":"u1","text":"hi","media_type":"image"}"#,
            r#"{"sender_id":"u1","text":"hi","metadata":[1]}"#,
        ] {
            assert!(
                matches!(parse(bad.as_bytes()), Err(RestError::Invalid(_))),
                "{bad}"
            );
        }
    }
}
