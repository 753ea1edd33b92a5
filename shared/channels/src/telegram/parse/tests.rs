//! Tests of [`super`], beside it so the module itself stays readable.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::*;
use crate::limits::MAX_TEXT_BYTES;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../../tests/fixtures/telegram/", $name, ".json"))
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
