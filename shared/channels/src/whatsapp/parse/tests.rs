//! Tests of [`super`], beside it so the module itself stays readable.

use chrono::{DateTime, Utc};
use serde_json::json;

use super::*;
use crate::limits::MAX_TEXT_BYTES;
use crate::statuses::DeliveryStatus;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../../tests/fixtures/whatsapp/", $name, ".json"))
    };
}

const PHONE_ID: &str = "106540352242922";

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).unwrap()
}

fn batch(body: &str) -> Batch {
    parse(body.as_bytes()).expect("parses")
}

fn one(body: &str) -> MessageEvent {
    let b = batch(body);
    assert_eq!(b.statuses, vec![]);
    assert_eq!(b.ignored, 0);
    assert_eq!(b.messages.len(), 1, "{b:?}");
    b.messages.into_iter().next().unwrap()
}

fn meta(extra: Option<(&str, &str)>) -> Option<Value> {
    let mut m = json!({"phone_number_id": PHONE_ID});
    if let Some((k, v)) = extra {
        m[k] = json!(v);
    }
    Some(m)
}

#[test]
fn text_message() {
    assert_eq!(
        one(fixture!("text")),
        MessageEvent {
            platform: Platform::Whatsapp,
            sender_id: "16315551181".into(),
            chat_id: "16315551181".into(),
            text: Some("this is a text message".into()),
            media: vec![],
            external_message_id: Some(
                "wamid.ID1234567890ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnop".into()
            ),
            sender_name: Some("Kerry Fisher".into()),
            received_at: at(1603059201),
            metadata: meta(None),
        }
    );
}

#[test]
fn image_with_caption() {
    assert_eq!(
        one(fixture!("image")),
        MessageEvent {
            platform: Platform::Whatsapp,
            sender_id: "16315551181".into(),
            chat_id: "16315551181".into(),
            text: Some("This is a caption".into()),
            media: vec![Media {
                kind: MediaKind::Image,
                platform_id: Some("1234567890123456".into()),
                url: None,
                mime_type: Some("image/jpeg".into()),
            }],
            external_message_id: Some("wamid.IMAGE_ID".into()),
            sender_name: Some("Kerry Fisher".into()),
            received_at: at(1603059202),
            metadata: meta(None),
        }
    );
}

#[test]
fn interactive_button_and_list_replies() {
    let e = one(fixture!("interactive_button_reply"));
    assert_eq!(e.text.as_deref(), Some("Yes, book it"));
    assert_eq!(e.metadata, meta(Some(("reply_id", "book-yes"))));
    assert_eq!(
        e.external_message_id.as_deref(),
        Some("wamid.BUTTON_REPLY_ID")
    );
    assert_eq!(e.received_at, at(1714510003));
    assert!(e.media.is_empty());

    let e = one(fixture!("interactive_list_reply"));
    assert_eq!(e.text.as_deref(), Some("Tomorrow 10:00"));
    assert_eq!(e.metadata, meta(Some(("reply_id", "slot-2"))));
}

#[test]
fn template_quick_reply_button() {
    let e = one(fixture!("button"));
    assert_eq!(e.text.as_deref(), Some("Stop promotions"));
    assert_eq!(e.metadata, meta(Some(("reply_id", "STOP_PROMO"))));
}

#[test]
fn location() {
    let e = one(fixture!("location"));
    assert_eq!(
        e.text.as_deref(),
        Some(
            "[location] Philz Coffee 101 Forest Ave, Palo Alto, CA 94301 (37.4421625,-122.1610568)"
        )
    );
    let body = json!({"object": "whatsapp_business_account", "entry": [{"changes": [{
        "field": "messages", "value": {"messages": [{"from": "1", "id": "w", "timestamp": "1700000000",
        "type": "location", "location": {"latitude": 1.25, "longitude": 2.5}}]}}]}]});
    let e = one(&body.to_string());
    assert_eq!(e.text.as_deref(), Some("[location] (1.25,2.5)"));
    assert_eq!(e.metadata, None);
    assert_eq!(e.sender_name, None);
}

#[test]
fn media_types() {
    let b = batch(fixture!("media_types"));
    assert_eq!(b.ignored, 0);
    let got: Vec<(Option<&str>, &Media)> = b
        .messages
        .iter()
        .map(|e| (e.text.as_deref(), &e.media[0]))
        .collect();
    let m = |kind, id: &str, mime: &str| Media {
        kind,
        platform_id: Some(id.into()),
        url: None,
        mime_type: Some(mime.into()),
    };
    assert_eq!(
        got,
        vec![
            (
                Some("menu.pdf"),
                &m(MediaKind::Document, "doc-1", "application/pdf")
            ),
            (
                None,
                &m(MediaKind::Voice, "voice-1", "audio/ogg; codecs=opus")
            ),
            (None, &m(MediaKind::Audio, "audio-1", "audio/mpeg")),
            (
                Some("our venue"),
                &m(MediaKind::Video, "video-1", "video/mp4")
            ),
            (None, &m(MediaKind::Sticker, "sticker-1", "image/webp")),
            (None, &m(MediaKind::Voice, "voice-2", "audio/ogg")),
        ]
    );
    assert!(b.messages.iter().all(|e| e.media.len() == 1));
}

type Row<'a> = (
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a Value>,
);

#[test]
fn several_messages_and_entries() {
    let b = batch(fixture!("multiple_messages"));
    assert_eq!(b.ignored, 0);
    let got: Vec<Row<'_>> = b
        .messages
        .iter()
        .map(|e| {
            (
                e.sender_id.as_str(),
                e.external_message_id.as_deref().unwrap(),
                e.text.as_deref(),
                e.sender_name.as_deref(),
                e.metadata.as_ref(),
            )
        })
        .collect();
    let p1 = json!({"phone_number_id": PHONE_ID});
    let p2 = json!({"phone_number_id": "200000000000002"});
    assert_eq!(
        got,
        vec![
            (
                "16315551181",
                "wamid.A1",
                Some("first"),
                Some("Kerry Fisher"),
                Some(&p1)
            ),
            (
                "16315551182",
                "wamid.A2",
                Some("second"),
                Some("Sam Lee"),
                Some(&p1)
            ),
            (
                "16315551181",
                "wamid.A3",
                Some("third"),
                Some("Kerry Fisher"),
                Some(&p1)
            ),
            (
                "447700900123",
                "wamid.B1",
                Some("other number"),
                Some("Ada"),
                Some(&p2)
            ),
        ]
    );
    assert!(b.messages.iter().all(|e| e.chat_id == e.sender_id));
    assert_eq!(b.messages[3].received_at, at(1700000500));
}

#[test]
fn statuses_only() {
    let b = batch(fixture!("statuses"));
    assert_eq!(b.messages, vec![]);
    assert_eq!(b.ignored, 0);
    let s = |id: &str, status, t| StatusUpdate {
        platform: Platform::Whatsapp,
        platform_message_id: id.into(),
        status,
        recipient_id: Some("16315551181".into()),
        occurred_at: at(t),
        error: None,
        error_code: None,
        error_title: None,
    };
    assert_eq!(
        b.statuses,
        vec![
            s("wamid.SENT", DeliveryStatus::Sent, 1700000001),
            s("wamid.SENT", DeliveryStatus::Delivered, 1700000002),
            s("wamid.SENT", DeliveryStatus::Read, 1700000003),
            StatusUpdate {
                error: Some(json!([{
                    "code": 131047,
                    "title": "Re-engagement message",
                    "message": "Re-engagement message",
                    "error_data": {"details": "Message failed to send because more than 24 hours have passed since the customer last replied to this number."},
                    "href": "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"
                }])),
                error_code: Some(131047),
                error_title: Some("Re-engagement message".into()),
                ..s("wamid.FAILED", DeliveryStatus::Failed, 1700000004)
            },
            s("wamid.DELETED", DeliveryStatus::Other, 1700000005),
        ]
    );
    assert_eq!(b.statuses[3].status.as_str(), "failed");
}

#[test]
fn unknown_types_are_ignored_not_errors() {
    let b = batch(fixture!("reaction"));
    assert_eq!((b.messages.len(), b.statuses.len(), b.ignored), (0, 0, 1));
    let b = batch(fixture!("unsupported"));
    assert_eq!((b.messages.len(), b.statuses.len(), b.ignored), (0, 0, 1));
    let b = batch(fixture!("system"));
    assert_eq!((b.messages.len(), b.statuses.len(), b.ignored), (0, 0, 1));
    // A change that is not about messages.
    let b = batch(fixture!("account_update"));
    assert_eq!((b.messages.len(), b.statuses.len(), b.ignored), (0, 0, 1));
}

#[test]
fn mixed_batch_keeps_the_good_items() {
    let b = batch(fixture!("mixed"));
    assert_eq!(b.messages.len(), 1);
    assert_eq!(b.messages[0].text.as_deref(), Some("still here"));
    assert_eq!(b.statuses.len(), 1);
    // a reaction, a message with a number for text, one without `from`, an image without
    // anything, a status without id, and a status that is a string
    assert_eq!(b.ignored, 6);
}

#[test]
fn unicode_is_kept_verbatim() {
    let e = one(fixture!("unicode"));
    assert_eq!(
        e.text.as_deref(),
        Some("Hello 👋🏽 مرحبا بالعالم שלום e\u{301}\u{302} 👨‍👩‍👧‍👦 🇺🇦")
    );
    assert_eq!(e.sender_name.as_deref(), Some("محمد 🌙"));
}

#[test]
fn very_long_text_is_cut_and_timestamps_are_lenient() {
    let text = format!("a{}", "😀".repeat(MAX_TEXT_BYTES / 2));
    let body = json!({"object": "whatsapp_business_account", "entry": [{"changes": [{
    "field": "messages", "value": {"messages": [
        {"from": "1", "id": "w1", "timestamp": 1700000000, "type": "text", "text": {"body": text}},
        {"from": "1", "id": "w2", "timestamp": "nope", "type": "text", "text": {"body": "x"}}
    ]}}]}]});
    let before = Utc::now();
    let b = batch(&body.to_string());
    let t = b.messages[0].text.as_deref().unwrap();
    assert_eq!(t.len(), MAX_TEXT_BYTES - 3);
    assert!(t.starts_with("a😀"));
    assert_eq!(b.messages[0].received_at, at(1700000000));
    assert!(b.messages[1].received_at >= before);
}

#[test]
fn every_message_and_status_of_a_large_body_is_parsed() {
    let msgs: Vec<Value> = (0..150)
        .map(|i| json!({"from": "1", "id": format!("w{i}"), "type": "text", "text": {"body": "x"}}))
        .collect();
    let statuses: Vec<Value> = (0..120)
        .map(|i| json!({"id": format!("s{i}"), "status": "read"}))
        .collect();
    let body =
        json!({"entry": [{"changes": [{"value": {"messages": msgs, "statuses": statuses}}]}]});
    let b = batch(&body.to_string());
    assert_eq!(
        (b.messages.len(), b.statuses.len(), b.ignored),
        (150, 120, 0)
    );
    assert_eq!(b.messages[149].external_message_id.as_deref(), Some("w149"));
}

#[test]
fn a_body_beyond_the_bound_is_refused_whole_not_truncated() {
    let statuses: Vec<Value> = (0..=MAX_ITEMS)
        .map(|i| json!({"id": format!("s{i}"), "status": "read"}))
        .collect();
    let body = json!({"entry": [{"changes": [{"value": {"statuses": statuses}}]}]});
    match parse(body.to_string().as_bytes()) {
        Err(ParseError::TooMany(n)) => assert_eq!(n, MAX_ITEMS + 1),
        other => panic!("{other:?}"),
    }
}

#[test]
fn garbage_is_an_error_or_empty_not_a_panic() {
    let deep = "[".repeat(10_000);
    let deep_in_message = format!(
        r#"{{"entry":[{{"changes":[{{"value":{{"messages":[{}"#,
        "[".repeat(10_000)
    );
    let errors: Vec<&[u8]> = vec![
        b"",
        b"{",
        b"[]",
        b"null",
        b"42",
        b"\xff",
        deep.as_bytes(),
        deep_in_message.as_bytes(),
        br#"{"object":"page","entry":[]}"#,
        br#"{"object":5}"#,
        br#"{"entry":{}}"#,
        br#"{"entry":[5]}"#,
        br#"{"entry":[{"changes":"x"}]}"#,
        br#"{"entry":[{"changes":[{"value":{"messages":{}}}]}]}"#,
        br#"{"entry":[{"changes":[{"value":{"contacts":[{"wa_id":1}]}}]}]}"#,
    ];
    for b in errors {
        let r = parse(b);
        assert!(r.is_err(), "{:?} -> {r:?}", String::from_utf8_lossy(b));
    }
    let empty = [
        &br#"{}"#[..],
        br#"{"object":"whatsapp_business_account"}"#,
        br#"{"object":"whatsapp_business_account","entry":[]}"#,
        br#"{"entry":[{}]}"#,
        br#"{"entry":[{"changes":[]}]}"#,
        // serde reads a struct from an array too: harmless below the top level.
        br#"{"entry":[{"changes":[{"value":[]}]}]}"#,
    ];
    for b in empty {
        assert_eq!(
            parse(b).unwrap(),
            Batch::default(),
            "{}",
            String::from_utf8_lossy(b)
        );
    }
    let odd = br#"{"entry":[{"changes":[{"field":"messages","value":{"messages":
        [null, 5, "x", [], {}, {"type":"text"}, {"from":"1","type":"text","text":"flat"},
         {"from":"1","type":"image","image":{"id":7}}, {"from":"1","type":"interactive","interactive":{}},
         {"from":"1","type":"button"}, {"from":"1","type":"location","location":{"latitude":"north"}}],
        "statuses":[null, {}, {"id":5}, {"id":"x","errors":"boom"}]}}]}]}"#;
    let b = parse(odd).unwrap();
    assert_eq!(b.messages, vec![]);
    assert_eq!(b.ignored, 14);
    assert_eq!(b.statuses.len(), 1);
    assert_eq!(b.statuses[0].status, DeliveryStatus::Other);
    assert_eq!(b.statuses[0].error, Some(json!("boom")));
}
