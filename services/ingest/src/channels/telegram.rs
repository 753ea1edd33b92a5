//! Telegram Bot API webhooks: one `Update` per request.
//!
//! Routed: `message`, `edited_message`, `channel_post` and `edited_channel_post` that carry
//! text, a caption, media (photo, document, voice, audio, video, video note, sticker) or a
//! location/venue. Everything else (callback queries, chat member changes, polls, service
//! messages such as "X joined") parses to an [`Update`] without an event, so the webhook can
//! still be acknowledged. Whom a message addresses (groups) and whether it is an edit are
//! read into [`Addressing`], which [`super::telegram_groups::admit`] judges.

use hermes_types::model::{Media, MediaKind, MessageEvent, Platform};
use serde::Deserialize;

use super::telegram_groups::{Addressing, Author, Facts, RawEntity};
use super::{
    ParseError, decode, from_unix_seconds, lenient_i64, location_text, short_field, text_field,
};

/// One parsed update.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    /// Telegram's sequence number of the update.
    pub update_id: i64,
    /// The message to route; `None` for updates we acknowledge but do not route.
    pub event: Option<MessageEvent>,
    /// Whom the message addresses, and whether it is an edit (with every event).
    pub addressing: Option<Addressing>,
}

/// Parses one webhook body. `Err` when it is not JSON or not an `Update` (no `update_id`, or a
/// message without `message_id`/`chat`, or fields of the wrong type).
pub fn parse(body: &[u8]) -> Result<Update, ParseError> {
    let raw: RawUpdate = decode(body)?;
    let (msg, edited) = if let Some(m) = raw.message {
        (m, false)
    } else if let Some(m) = raw.edited_message {
        (m, true)
    } else if let Some(m) = raw.channel_post {
        (m, false)
    } else if let Some(m) = raw.edited_channel_post {
        (m, true)
    } else {
        return Ok(Update {
            update_id: raw.update_id,
            event: None,
            addressing: None,
        });
    };
    let entities = match msg.text {
        Some(_) => &msg.entities,
        None => &msg.caption_entities,
    };
    let replies_to = msg.reply_to_message.as_ref().and_then(|r| r.from.as_ref());
    let facts = Facts::new(
        msg.chat.kind.as_deref(),
        msg.message_id,
        edited,
        entities.clone(),
        replies_to.map(|u| Author {
            id: Some(u.id),
            is_bot: u.is_bot.unwrap_or(false),
            username: short_field(u.username.clone()),
        }),
    );
    let event = event(msg, edited);
    let addressing = event.as_ref().map(|e| facts.addressing(e.text.as_deref()));
    Ok(Update {
        update_id: raw.update_id,
        event,
        addressing,
    })
}

fn event(m: RawMessage, edited: bool) -> Option<MessageEvent> {
    let media = media(&m);
    let text = text_field(m.text.or(m.caption)).or_else(|| {
        if let Some(v) = &m.venue {
            let loc = v.location.as_ref();
            Some(location_text(
                v.title.as_deref(),
                v.address.as_deref(),
                loc.and_then(|l| l.latitude),
                loc.and_then(|l| l.longitude),
            ))
        } else {
            m.location
                .as_ref()
                .map(|l| location_text(None, None, l.latitude, l.longitude))
        }
    });
    if text.is_none() && media.is_empty() {
        return None;
    }

    let chat_id = m.chat.id.to_string();
    let (sender_id, sender_name) = match (&m.from, &m.sender_chat) {
        (Some(u), _) => (u.id.to_string(), user_name(u)),
        (None, Some(c)) => (c.id.to_string(), short_field(c.title.clone())),
        (None, None) => (chat_id.clone(), short_field(m.chat.title.clone())),
    };
    let external_message_id = if edited {
        let at = m.edit_date.or(m.date).unwrap_or(0);
        format!("{chat_id}:{}:edit:{at}", m.message_id)
    } else {
        format!("{chat_id}:{}", m.message_id)
    };
    // An edit arrives when it is made, so it is received then.
    let received_at = from_unix_seconds(if edited {
        m.edit_date.or(m.date)
    } else {
        m.date
    });

    Some(MessageEvent {
        platform: Platform::Telegram,
        sender_id,
        chat_id,
        text,
        media,
        external_message_id: Some(external_message_id),
        sender_name,
        received_at,
        metadata: None,
    })
}

/// "First Last", else "First", else the username.
fn user_name(u: &RawUser) -> Option<String> {
    let full: Vec<&str> = [u.first_name.as_deref(), u.last_name.as_deref()]
        .into_iter()
        .flatten()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if full.is_empty() {
        short_field(u.username.clone())
    } else {
        short_field(Some(full.join(" ")))
    }
}

fn media(m: &RawMessage) -> Vec<Media> {
    let mut out = Vec::new();
    // Telegram sends every size of a photo; the largest is the original.
    let largest = m
        .photo
        .iter()
        .enumerate()
        .max_by_key(|(i, p)| {
            let area = p.width.unwrap_or(0).saturating_mul(p.height.unwrap_or(0));
            (p.file_size.unwrap_or(0), area, *i)
        })
        .map(|(_, p)| p);
    if let Some(id) = largest.and_then(|p| short_field(p.file_id.clone())) {
        out.push(Media {
            kind: MediaKind::Image,
            platform_id: Some(id),
            url: None,
            mime_type: None,
        });
    }
    let files = [
        (MediaKind::Document, &m.document),
        (MediaKind::Voice, &m.voice),
        (MediaKind::Audio, &m.audio),
        (MediaKind::Video, &m.video),
        (MediaKind::Video, &m.video_note),
        (MediaKind::Sticker, &m.sticker),
    ];
    for (kind, file) in files {
        let Some(f) = file else { continue };
        let Some(id) = short_field(f.file_id.clone()) else {
            continue;
        };
        out.push(Media {
            kind,
            platform_id: Some(id),
            url: None,
            mime_type: short_field(f.mime_type.clone()),
        });
    }
    out
}

#[derive(Deserialize)]
struct RawUpdate {
    update_id: i64,
    #[serde(default)]
    message: Option<RawMessage>,
    #[serde(default)]
    edited_message: Option<RawMessage>,
    #[serde(default)]
    channel_post: Option<RawMessage>,
    #[serde(default)]
    edited_channel_post: Option<RawMessage>,
}

#[derive(Deserialize)]
struct RawMessage {
    message_id: i64,
    #[serde(default)]
    from: Option<RawUser>,
    #[serde(default)]
    sender_chat: Option<RawChat>,
    chat: RawChat,
    #[serde(default, deserialize_with = "lenient_i64")]
    date: Option<i64>,
    #[serde(default, deserialize_with = "lenient_i64")]
    edit_date: Option<i64>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    caption: Option<String>,
    #[serde(default)]
    entities: Vec<RawEntity>,
    #[serde(default)]
    caption_entities: Vec<RawEntity>,
    #[serde(default)]
    reply_to_message: Option<Box<RawReplied>>,
    #[serde(default)]
    photo: Vec<RawPhotoSize>,
    #[serde(default)]
    document: Option<RawFile>,
    #[serde(default)]
    voice: Option<RawFile>,
    #[serde(default)]
    audio: Option<RawFile>,
    #[serde(default)]
    video: Option<RawFile>,
    #[serde(default)]
    video_note: Option<RawFile>,
    #[serde(default)]
    sticker: Option<RawFile>,
    #[serde(default)]
    location: Option<RawLocation>,
    #[serde(default)]
    venue: Option<RawVenue>,
}

/// The message a message replies to: only its author is read.
#[derive(Deserialize)]
struct RawReplied {
    #[serde(default)]
    from: Option<RawUser>,
}

#[derive(Deserialize)]
struct RawUser {
    id: i64,
    #[serde(default)]
    is_bot: Option<bool>,
    #[serde(default)]
    first_name: Option<String>,
    #[serde(default)]
    last_name: Option<String>,
    #[serde(default)]
    username: Option<String>,
}

#[derive(Deserialize)]
struct RawChat {
    id: i64,
    #[serde(default)]
    title: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct RawPhotoSize {
    #[serde(default)]
    file_id: Option<String>,
    #[serde(default)]
    width: Option<u64>,
    #[serde(default)]
    height: Option<u64>,
    #[serde(default)]
    file_size: Option<u64>,
}

#[derive(Deserialize)]
struct RawFile {
    #[serde(default)]
    file_id: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
}

#[derive(Deserialize)]
struct RawLocation {
    #[serde(default)]
    latitude: Option<f64>,
    #[serde(default)]
    longitude: Option<f64>,
}

#[derive(Deserialize)]
struct RawVenue {
    #[serde(default)]
    location: Option<RawLocation>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    address: Option<String>,
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Utc};
    use serde_json::json;

    use super::*;
    use crate::channels::MAX_TEXT_BYTES;

    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!("../../tests/fixtures/telegram/", $name, ".json"))
        };
    }

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).unwrap()
    }

    fn routed(body: &str) -> MessageEvent {
        parse(body.as_bytes())
            .expect("parses")
            .event
            .expect("routed")
    }

    fn not_routed(body: &str) -> i64 {
        let u = parse(body.as_bytes()).expect("parses");
        assert_eq!(u.event, None);
        u.update_id
    }

    fn image(id: &str) -> Media {
        Media {
            kind: MediaKind::Image,
            platform_id: Some(id.into()),
            url: None,
            mime_type: None,
        }
    }

    #[test]
    fn text_message() {
        let u = parse(fixture!("text").as_bytes()).unwrap();
        assert_eq!(u.update_id, 10000);
        assert_eq!(
            u.event,
            Some(MessageEvent {
                platform: Platform::Telegram,
                sender_id: "1111111".into(),
                chat_id: "1111111".into(),
                text: Some("/start".into()),
                media: vec![],
                external_message_id: Some("1111111:1365".into()),
                sender_name: Some("Test Test Lastname".into()),
                received_at: at(1441645532),
                metadata: None,
            })
        );
    }

    #[test]
    fn group_message_with_username_only() {
        let e = routed(fixture!("group_username_only"));
        assert_eq!(e.chat_id, "-1001234567890");
        assert_eq!(e.sender_id, "222333444");
        assert_eq!(e.sender_name.as_deref(), Some("jdoe"));
        assert_eq!(e.external_message_id.as_deref(), Some("-1001234567890:77"));
        assert_eq!(e.text.as_deref(), Some("hi all"));
    }

    #[test]
    fn photo_with_caption_takes_the_largest_size() {
        let e = routed(fixture!("photo_caption"));
        assert_eq!(e.text.as_deref(), Some("Look at this"));
        // file_size decides, even though it is not the last entry.
        assert_eq!(e.media, vec![image("AgACAgIAAxkBAAIBbig")]);
        assert_eq!(e.sender_name.as_deref(), Some("Alice"));
        assert_eq!(e.received_at, at(1700000100));
        assert_eq!(e.external_message_id.as_deref(), Some("1111111:1366"));
    }

    #[test]
    fn photo_without_text_or_file_sizes() {
        let e = routed(fixture!("photo_only"));
        assert_eq!(e.text, None);
        // No file_size: the largest area wins, then the last.
        assert_eq!(e.media, vec![image("photo-1280")]);
    }

    #[test]
    fn photo_sizes_without_anything_take_the_last() {
        let body = json!({"update_id": 1, "message": {"message_id": 1, "date": 1700000000,
            "chat": {"id": 5, "type": "private"}, "photo": [{"file_id": "a"}, {"file_id": "b"}]}});
        let e = routed(&body.to_string());
        assert_eq!(e.media, vec![image("b")]);
    }

    #[test]
    fn document_voice_audio_video_sticker() {
        let cases = [
            (
                fixture!("document"),
                MediaKind::Document,
                "BQACAgIAAxkBAAIBdoc",
                Some("application/pdf"),
                Some("the invoice"),
            ),
            (
                fixture!("voice"),
                MediaKind::Voice,
                "AwACAgIAAxkBAAIBvoice",
                Some("audio/ogg"),
                None,
            ),
            (
                fixture!("audio"),
                MediaKind::Audio,
                "CQACAgIAAxkBAAIBaudio",
                Some("audio/mpeg"),
                None,
            ),
            (
                fixture!("video"),
                MediaKind::Video,
                "BAACAgIAAxkBAAIBvideo",
                Some("video/mp4"),
                Some("🎬 clip"),
            ),
            (
                fixture!("sticker"),
                MediaKind::Sticker,
                "CAACAgIAAxkBAAIBsticker",
                None,
                None,
            ),
        ];
        for (body, kind, id, mime, text) in cases {
            let e = routed(body);
            assert_eq!(
                e.media,
                vec![Media {
                    kind,
                    platform_id: Some(id.into()),
                    url: None,
                    mime_type: mime.map(Into::into),
                }],
                "{body}"
            );
            assert_eq!(e.text.as_deref(), text, "{body}");
            assert_eq!(e.sender_id, "1111111");
        }
    }

    #[test]
    fn edited_message_has_a_key_of_its_own_per_edit() {
        let u = parse(fixture!("edited_message").as_bytes()).unwrap();
        assert_eq!(u.update_id, 10005);
        assert_eq!(
            u.event,
            Some(MessageEvent {
                platform: Platform::Telegram,
                sender_id: "1111111".into(),
                chat_id: "1111111".into(),
                text: Some("fixed typo".into()),
                media: vec![],
                external_message_id: Some("1111111:1365:edit:1441645600".into()),
                sender_name: Some("Test Test Lastname".into()),
                received_at: at(1441645600),
                metadata: None,
            })
        );
    }

    #[test]
    fn channel_post_uses_the_sender_chat() {
        let e = routed(fixture!("channel_post"));
        assert_eq!(
            e,
            MessageEvent {
                platform: Platform::Telegram,
                sender_id: "-1009876543210".into(),
                chat_id: "-1009876543210".into(),
                text: Some("Channel announcement".into()),
                media: vec![],
                external_message_id: Some("-1009876543210:42".into()),
                sender_name: Some("Hermes News".into()),
                received_at: at(1700000200),
                metadata: None,
            }
        );
        let e = routed(fixture!("edited_channel_post"));
        assert_eq!(
            e.external_message_id.as_deref(),
            Some("-1009876543210:42:edit:1700000300")
        );
        assert_eq!(e.text.as_deref(), Some("Channel announcement (updated)"));
    }

    #[test]
    fn unicode_is_kept_verbatim() {
        let e = routed(fixture!("unicode"));
        assert_eq!(
            e.text.as_deref(),
            Some("Hello 👋🏽 مرحبا بالعالم שלום e\u{301}\u{302} 👨‍👩‍👧‍👦 🇺🇦")
        );
        assert_eq!(e.sender_name.as_deref(), Some("Zoë Ångström"));
    }

    #[test]
    fn location_and_venue() {
        let e = routed(fixture!("location"));
        assert_eq!(e.text.as_deref(), Some("[location] (51.500729,-0.124625)"));
        assert!(e.media.is_empty());
        let body = json!({"update_id": 2, "message": {"message_id": 3, "date": 1700000000,
            "chat": {"id": 5}, "from": {"id": 5, "first_name": "A"},
            "venue": {"location": {"latitude": 1.5, "longitude": 2.5},
                      "title": "Cafe", "address": "1 Main St"}}});
        let e = routed(&body.to_string());
        assert_eq!(
            e.text.as_deref(),
            Some("[location] Cafe 1 Main St (1.5,2.5)")
        );
    }

    #[test]
    fn updates_we_do_not_route() {
        assert_eq!(not_routed(fixture!("callback_query")), 10010);
        assert_eq!(not_routed(fixture!("my_chat_member")), 10011);
        assert_eq!(not_routed(fixture!("new_chat_members")), 10012);
        assert_eq!(not_routed(fixture!("poll")), 10013);
    }

    #[test]
    fn missing_or_bad_date_falls_back_to_now() {
        let before = Utc::now();
        for date in [json!(null), json!("soon"), json!(-1), json!(1e300)] {
            let body = json!({"update_id": 1, "message": {"message_id": 1, "date": date,
                "chat": {"id": 5}, "text": "x"}});
            let e = routed(&body.to_string());
            assert!(e.received_at >= before && e.received_at <= Utc::now());
            // No `from` and no `sender_chat`: the chat is the sender.
            assert_eq!(e.sender_id, "5");
            assert_eq!(e.sender_name, None);
        }
    }

    #[test]
    fn very_long_text_is_cut_on_a_char_boundary() {
        let text = "ж".repeat(MAX_TEXT_BYTES); // 2 bytes each: twice the limit
        let body = json!({"update_id": 1, "message": {"message_id": 1, "date": 1700000000,
            "chat": {"id": 5}, "text": text}});
        let e = routed(&body.to_string());
        let t = e.text.unwrap();
        assert_eq!(t.len(), MAX_TEXT_BYTES);
        assert!(t.chars().all(|c| c == 'ж'));
        let odd = format!("a{}", "ж".repeat(MAX_TEXT_BYTES));
        let body = json!({"update_id": 1, "message": {"message_id": 1, "chat": {"id": 5},
            "text": odd}});
        assert_eq!(
            routed(&body.to_string()).text.unwrap().len(),
            MAX_TEXT_BYTES - 1
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let deep = "[".repeat(10_000);
        let deep_obj = format!(r#"{{"update_id":1,"message":{}"#, r#"{"a":"#.repeat(10_000));
        let bad: Vec<&[u8]> = vec![
            b"",
            b"{",
            b"[]",
            b"null",
            b"42",
            b"\"str\"",
            b"{}",
            b"\xff\xfe",
            deep.as_bytes(),
            deep_obj.as_bytes(),
            br#"{"update_id":"1"}"#,
            br#"{"update_id":1,"message":{"message_id":1}}"#,
            br#"{"update_id":1,"message":{"message_id":"x","chat":{"id":1}}}"#,
            br#"{"update_id":1,"message":{"message_id":1,"chat":{"id":1},"text":5}}"#,
            br#"{"update_id":1,"message":{"message_id":1,"chat":{"id":1},"photo":{}}}"#,
            br#"{"update_id":1,"message":{"message_id":1,"chat":{"id":1},"photo":[{"width":-1}]}}"#,
            br#"{"update_id":1,"message":{"message_id":1,"chat":{"id":1e400}}}"#,
            br#"{"update_id":99999999999999999999999}"#,
        ];
        for b in bad {
            let r = parse(b);
            assert!(r.is_err(), "{:?} -> {r:?}", String::from_utf8_lossy(b));
        }
        // JSON of the right shape but routing nothing: fine, no event.
        assert_eq!(not_routed(r#"{"update_id":7,"message":null}"#), 7);
        assert_eq!(
            not_routed(r#"{"update_id":7,"message":{"message_id":1,"chat":{"id":1}}}"#),
            7
        );
        assert_eq!(
            not_routed(
                r#"{"update_id":7,"message":{"message_id":1,"chat":{"id":1},"photo":[],"text":""}}"#
            ),
            7
        );
    }

    #[test]
    fn extreme_numbers_do_not_overflow() {
        let body = json!({"update_id": i64::MIN, "edited_message": {"message_id": i64::MAX,
            "date": i64::MAX, "edit_date": i64::MIN, "chat": {"id": i64::MIN},
            "from": {"id": i64::MAX}, "text": "x",
            "photo": [{"file_id": "p", "width": u64::MAX, "height": u64::MAX, "file_size": u64::MAX}]}});
        let u = parse(body.to_string().as_bytes()).unwrap();
        let e = u.event.unwrap();
        assert_eq!(
            e.external_message_id.unwrap(),
            format!("{}:{}:edit:{}", i64::MIN, i64::MAX, i64::MIN)
        );
        assert_eq!(e.media, vec![image("p")]);
    }
}
