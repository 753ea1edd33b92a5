//! The Messenger Platform's webhooks, the same for Instagram (`object: instagram`,
//! <https://developers.facebook.com/docs/messenger-platform/instagram/features/webhook>) and
//! Facebook Messenger (`object: page`,
//! <https://developers.facebook.com/docs/messenger-platform/webhooks>): `entry[].messaging[]`
//! items, each a message, an echo of our own message, a read receipt, a reaction or a postback.
//!
//! Routed: messages that are not echoes and carry text or media (image, video, audio, file
//! attachments). Everything else, and items that do not parse, are skipped: one odd item never
//! loses the others.

use hermes_types::model::{Media, MediaKind, MessageEvent, Platform};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::decode::{ParseError, decode};
use crate::fields::{from_unix_millis, lenient_i64, lenient_id};
use crate::limits::{MAX_ATTACHMENTS, MAX_ITEMS, short_field, text_field, truncate_utf8};

/// Which Messenger Platform product a webhook is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Product {
    /// Instagram messaging (`object: instagram`).
    Instagram,
    /// Facebook Messenger, a Page's inbox (`object: page`).
    Messenger,
}

impl Product {
    /// The body's `object`.
    fn object(self) -> &'static str {
        match self {
            Product::Instagram => "instagram",
            Product::Messenger => "page",
        }
    }

    fn platform(self) -> Platform {
        match self {
            Product::Instagram => Platform::Instagram,
            Product::Messenger => Platform::Messenger,
        }
    }
}

/// Parses one webhook body of `product` into the messages to route, in body order. `Err`
/// when it is not JSON, not an object, names another `object` than the product's, or its
/// entries are not arrays/objects.
///
/// Each event's metadata is `{"recipient_id": …}` (the account or Page that received the
/// message, so the reply goes out from it) and, for quick replies, `{"reply_id": payload}`.
pub fn parse(body: &[u8], product: Product) -> Result<Vec<MessageEvent>, ParseError> {
    let raw: RawBody = decode(body)?;
    if let Some(object) = raw.object.as_deref()
        && object != product.object()
    {
        return Err(ParseError::Shape(format!(
            "object is {:?}, not {:?}",
            truncate_utf8(object, 64),
            product.object()
        )));
    }
    let items: usize = raw.entry.iter().map(|e| e.messaging.len()).sum();
    if items > MAX_ITEMS {
        return Err(ParseError::TooMany(items));
    }
    let mut out = Vec::new();
    for entry in raw.entry {
        for item in entry.messaging {
            let Ok(item) = serde_json::from_value::<RawMessaging>(item) else {
                continue;
            };
            if let Some(e) = event(item, entry.time, product.platform()) {
                out.push(e);
            }
        }
    }
    Ok(out)
}

fn event(item: RawMessaging, entry_time: Option<i64>, platform: Platform) -> Option<MessageEvent> {
    let m = item.message?;
    if m.is_echo || m.is_deleted {
        return None;
    }
    let sender = item.sender.and_then(|s| s.id)?;
    let media: Vec<Media> = m
        .attachments
        .into_iter()
        .filter_map(|a| {
            let kind = match a.kind.as_deref()? {
                "image" => MediaKind::Image,
                "video" => MediaKind::Video,
                "audio" => MediaKind::Audio,
                "file" => MediaKind::Document,
                _ => return None,
            };
            let url = short_field(a.payload?.url)?;
            Some(Media {
                kind,
                platform_id: None,
                url: Some(url),
                mime_type: None,
            })
        })
        .take(MAX_ATTACHMENTS)
        .collect();
    let text = text_field(m.text);
    if text.is_none() && media.is_empty() {
        return None;
    }

    let mut meta = Map::new();
    if let Some(id) = item.recipient.and_then(|r| r.id) {
        meta.insert("recipient_id".into(), Value::String(id));
    }
    if let Some(p) = m.quick_reply.and_then(|q| short_field(q.payload)) {
        meta.insert("reply_id".into(), Value::String(p));
    }

    Some(MessageEvent {
        platform,
        sender_id: sender.clone(),
        chat_id: sender,
        text,
        media,
        external_message_id: short_field(m.mid),
        sender_name: None,
        received_at: from_unix_millis(item.timestamp.or(entry_time)),
        metadata: (!meta.is_empty()).then_some(Value::Object(meta)),
    })
}

#[derive(Deserialize)]
struct RawBody {
    #[serde(default)]
    object: Option<String>,
    #[serde(default)]
    entry: Vec<RawEntry>,
}

#[derive(Deserialize)]
struct RawEntry {
    /// Milliseconds.
    #[serde(default, deserialize_with = "lenient_i64")]
    time: Option<i64>,
    /// Parsed one by one, so one odd item does not lose the others.
    #[serde(default)]
    messaging: Vec<Value>,
}

#[derive(Deserialize)]
struct RawMessaging {
    #[serde(default)]
    sender: Option<RawParty>,
    #[serde(default)]
    recipient: Option<RawParty>,
    /// Milliseconds.
    #[serde(default, deserialize_with = "lenient_i64")]
    timestamp: Option<i64>,
    #[serde(default)]
    message: Option<RawMessage>,
}

#[derive(Deserialize)]
struct RawParty {
    #[serde(default, deserialize_with = "lenient_id")]
    id: Option<String>,
}

#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    mid: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    is_echo: bool,
    #[serde(default)]
    is_deleted: bool,
    #[serde(default)]
    attachments: Vec<RawAttachment>,
    #[serde(default)]
    quick_reply: Option<RawQuickReply>,
}

#[derive(Deserialize)]
struct RawAttachment {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    payload: Option<RawPayload>,
}

#[derive(Deserialize)]
struct RawPayload {
    #[serde(default)]
    url: Option<String>,
}

#[derive(Deserialize)]
struct RawQuickReply {
    #[serde(default)]
    payload: Option<String>,
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use serde_json::json;

    use super::*;
    use crate::limits::MAX_TEXT_BYTES;

    /// The Instagram product's parse: most fixtures are Instagram's.
    fn parse(body: &[u8]) -> Result<Vec<MessageEvent>, ParseError> {
        super::parse(body, Product::Instagram)
    }

    /// A Page's inbox is read the same way, as Messenger's, and only as Messenger's.
    #[test]
    fn messenger_bodies_are_pages_and_their_messages_messengers() {
        let body = include_str!("../../tests/fixtures/messenger/text.json");
        let events = super::parse(body.as_bytes(), Product::Messenger).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].platform, Platform::Messenger);
        assert_eq!(events[0].text.as_deref(), Some("hello, world!"));
        assert_eq!(events[0].sender_id, "1254459154682919");
        assert!(super::parse(body.as_bytes(), Product::Instagram).is_err());
        let ig = include_str!("../../tests/fixtures/instagram/text.json");
        assert!(super::parse(ig.as_bytes(), Product::Messenger).is_err());
    }

    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!("../../tests/fixtures/instagram/", $name, ".json"))
        };
    }

    const ACCOUNT: &str = "17841400000000001";

    fn at_ms(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(ms).unwrap()
    }

    fn events(body: &str) -> Vec<MessageEvent> {
        parse(body.as_bytes()).expect("parses")
    }

    fn image(url: &str) -> Media {
        Media {
            kind: MediaKind::Image,
            platform_id: None,
            url: Some(url.into()),
            mime_type: None,
        }
    }

    #[test]
    fn text_message() {
        assert_eq!(
            events(fixture!("text")),
            vec![MessageEvent {
                platform: Platform::Instagram,
                sender_id: "1234567890123456".into(),
                chat_id: "1234567890123456".into(),
                text: Some("hello from instagram".into()),
                media: vec![],
                external_message_id: Some(
                    "aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxNDAwMDAw".into()
                ),
                sender_name: None,
                received_at: at_ms(1700000000123),
                metadata: Some(json!({"recipient_id": ACCOUNT})),
            }]
        );
    }

    #[test]
    fn image_attachment_without_text() {
        assert_eq!(
            events(fixture!("image")),
            vec![MessageEvent {
                platform: Platform::Instagram,
                sender_id: "1234567890123456".into(),
                chat_id: "1234567890123456".into(),
                text: None,
                media: vec![image(
                    "https://lookaside.fbsbx.com/ig_messaging_cdn/?asset_id=17900000000000001&signature=abc"
                )],
                external_message_id: Some("mid.image.1".into()),
                sender_name: None,
                received_at: at_ms(1700000001000),
                metadata: Some(json!({"recipient_id": ACCOUNT})),
            }]
        );
    }

    #[test]
    fn attachment_kinds() {
        let e = events(fixture!("attachments"));
        assert_eq!(e.len(), 1);
        let kinds: Vec<(MediaKind, &str)> = e[0]
            .media
            .iter()
            .map(|m| (m.kind, m.url.as_deref().unwrap()))
            .collect();
        // share, story_mention, ig_reel and an attachment without url are left out.
        assert_eq!(
            kinds,
            vec![
                (MediaKind::Video, "https://cdn.example/video.mp4"),
                (MediaKind::Audio, "https://cdn.example/audio.mp4"),
                (MediaKind::Document, "https://cdn.example/file.pdf"),
                (MediaKind::Image, "https://cdn.example/image.jpg"),
            ]
        );
        assert_eq!(e[0].text.as_deref(), Some("see attached"));
    }

    #[test]
    fn echoes_reactions_reads_and_postbacks_are_not_routed() {
        for body in [
            fixture!("echo"),
            fixture!("reaction"),
            fixture!("read"),
            fixture!("postback"),
            fixture!("deleted"),
            fixture!("unsupported_attachment"),
        ] {
            assert_eq!(events(body), vec![], "{body}");
        }
    }

    #[test]
    fn several_items_and_entries() {
        let e = events(fixture!("multiple"));
        let got: Vec<(&str, Option<&str>, Option<&str>)> = e
            .iter()
            .map(|e| {
                (
                    e.sender_id.as_str(),
                    e.external_message_id.as_deref(),
                    e.text.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("111", Some("mid.1"), Some("one")),
                ("222", Some("mid.2"), Some("two")),
                ("333", Some("mid.4"), Some("four")),
            ]
        );
        // The item without a timestamp takes the entry's time.
        assert_eq!(e[2].received_at, at_ms(1700000009000));
        assert_eq!(
            e[2].metadata,
            Some(json!({"recipient_id": "17841400000000002"}))
        );
    }

    #[test]
    fn quick_reply_payload_is_kept() {
        let e = events(fixture!("quick_reply"));
        assert_eq!(e[0].text.as_deref(), Some("Red"));
        assert_eq!(
            e[0].metadata,
            Some(json!({"recipient_id": ACCOUNT, "reply_id": "COLOR_RED"}))
        );
    }

    #[test]
    fn unicode_is_kept_verbatim() {
        let e = events(fixture!("unicode"));
        assert_eq!(
            e[0].text.as_deref(),
            Some("Hello 👋🏽 مرحبا بالعالم שלום e\u{301}\u{302} 👨‍👩‍👧‍👦 🇺🇦")
        );
    }

    #[test]
    fn very_long_text_is_cut_and_numeric_ids_are_accepted() {
        let body = json!({"object": "instagram", "entry": [{"id": "1", "time": 1, "messaging": [{
            "sender": {"id": 42}, "recipient": {"id": 7}, "timestamp": "1700000000000",
            "message": {"mid": "m", "text": "ü".repeat(MAX_TEXT_BYTES)}}]}]});
        let e = events(&body.to_string());
        assert_eq!(e[0].text.as_ref().unwrap().len(), MAX_TEXT_BYTES);
        assert_eq!(e[0].sender_id, "42");
        assert_eq!(e[0].received_at, at_ms(1700000000000));
        assert_eq!(e[0].metadata, Some(json!({"recipient_id": "7"})));
    }

    #[test]
    fn every_item_of_a_large_body_is_parsed_and_beyond_the_bound_refused() {
        let items = |n: usize| -> Vec<Value> {
            (0..n)
                .map(|i| json!({"sender": {"id": "1"}, "message": {"mid": format!("m{i}"), "text": "x"}}))
                .collect()
        };
        let body = json!({"object": "instagram", "entry": [{"messaging": items(150)}]});
        let e = events(&body.to_string());
        assert_eq!(e.len(), 150);
        assert!(e[0].received_at <= Utc::now());
        assert_eq!(e[0].metadata, None);
        let body = json!({"object": "instagram", "entry": [{"messaging": items(MAX_ITEMS + 1)}]});
        assert!(matches!(
            parse(body.to_string().as_bytes()),
            Err(ParseError::TooMany(_))
        ));
    }

    #[test]
    fn garbage_is_an_error_or_empty_not_a_panic() {
        let deep = "[".repeat(10_000);
        let errors: Vec<&[u8]> = vec![
            b"",
            b"{",
            b"[]",
            b"null",
            b"true",
            b"\x00",
            deep.as_bytes(),
            br#"{"object":"page","entry":[]}"#,
            br#"{"object":"whatsapp_business_account"}"#,
            br#"{"entry":"x"}"#,
            br#"{"entry":[{"messaging":{}}]}"#,
        ];
        for b in errors {
            let r = parse(b);
            assert!(r.is_err(), "{:?} -> {r:?}", String::from_utf8_lossy(b));
        }
        let odd = br#"{"object":"instagram","entry":[{"time":"later","messaging":[
            null, 1, [], {}, {"message":{}}, {"sender":{},"message":{"text":"no sender"}},
            {"sender":{"id":true},"message":{"text":"bad sender"}},
            {"sender":{"id":"1"},"message":{"text":5}},
            {"sender":{"id":"1"},"message":{"is_echo":"yes","text":"x"}},
            {"sender":{"id":"1"},"message":{"attachments":[{"type":"image"},{"payload":{"url":"u"}}]}},
            {"sender":{"id":"1"},"message":{"attachments":{}}}
        ]}]}"#;
        assert_eq!(parse(odd).unwrap(), vec![]);
        assert_eq!(parse(b"{}").unwrap(), vec![]);
        assert_eq!(
            parse(br#"{"object":"instagram","entry":[{}]}"#).unwrap(),
            vec![]
        );
    }
}
