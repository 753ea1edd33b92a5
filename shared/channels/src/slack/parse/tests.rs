//! The parser on Slack's published examples (`tests/fixtures/slack/`) and on what it must
//! survive.

use hermes_config::SlackChannelReplies::{Channel, Thread};
use hermes_types::model::{ChatKind, MediaKind};

use super::*;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("../../../tests/fixtures/slack/", $name))
    };
}

fn routed(body: &[u8], replies: SlackChannelReplies) -> Inbound {
    match parse(body, replies).unwrap() {
        Request::Message(m) => *m,
        other => panic!("not routed: {other:?}"),
    }
}

fn skipped(body: &[u8]) -> Skip {
    match parse(body, Thread).unwrap() {
        Request::Skipped(why) => why,
        other => panic!("not skipped: {other:?}"),
    }
}

#[test]
fn the_url_verification_challenge_is_answered() {
    match parse(fixture!("url_verification.json"), Thread).unwrap() {
        Request::Challenge(c) => {
            assert_eq!(c, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
        }
        other => panic!("{other:?}"),
    }
    for bad in [
        r#"{"type":"url_verification"}"#.to_string(),
        r#"{"type":"url_verification","challenge":""}"#.into(),
        r#"{"type":"url_verification","challenge":7}"#.into(),
        r#"{"type":"url_verification","challenge":"a\nb"}"#.into(),
        format!(
            r#"{{"type":"url_verification","challenge":"{}"}}"#,
            "a".repeat(MAX_CHALLENGE_CHARS + 1)
        ),
    ] {
        assert!(parse(bad.as_bytes(), Thread).is_err(), "{bad}");
    }
}

#[test]
fn a_direct_message_is_routed_with_its_event_id_as_the_dedupe_key() {
    let m = routed(fixture!("im_message.json"), Thread);
    let e = &m.event;
    assert_eq!(e.platform, Platform::Slack);
    assert_eq!(
        (e.sender_id.as_str(), e.chat_id.as_str()),
        ("U2147483697", "D024BE91L")
    );
    assert_eq!(e.text.as_deref(), Some("Hello hello can you hear me?"));
    assert_eq!(e.external_message_id.as_deref(), Some("Ev0PV52K21"));
    assert_eq!(e.sender_name.as_deref(), Some("ada"));
    assert_eq!(e.received_at.timestamp(), 1_355_517_523);
    assert_eq!(m.chat_kind, ChatKind::Direct);
}

#[test]
fn a_mention_is_answered_in_a_thread_under_it_or_in_the_channel() {
    let m = routed(fixture!("app_mention.json"), Thread);
    assert_eq!(m.event.chat_id, "C0LAN2Q65:1515449522.000016");
    assert_eq!(
        m.event.text.as_deref(),
        Some("is it everything a river should be?")
    );
    assert_eq!(m.chat_kind, ChatKind::Group);
    let m = routed(fixture!("app_mention.json"), Channel);
    assert_eq!(m.event.chat_id, "C0LAN2Q65");
    // A mention inside a thread is answered in that thread, whatever the setting.
    for replies in [Thread, Channel] {
        let m = routed(fixture!("thread_mention.json"), replies);
        assert_eq!(m.event.chat_id, "C0LAN2Q65:1515449522.000016");
        assert_eq!(m.event.text.as_deref(), Some("and what about the sea?"));
    }
}

#[test]
fn files_are_referenced_for_a_fetch_with_the_bot_token() {
    let m = routed(fixture!("file_share.json"), Thread);
    let media = &m.event.media;
    assert_eq!(media.len(), 2);
    assert_eq!(media[0].kind, MediaKind::Image);
    assert_eq!(media[0].platform_id.as_deref(), Some("F0S43PZDF"));
    assert_eq!(
        media[0].url.as_deref(),
        Some("https://files.slack.com/files-pri/T061EG9R6-F0S43PZDF/download/photo.png")
    );
    assert_eq!(media[0].mime_type.as_deref(), Some("image/png"));
    assert_eq!(media[1].kind, MediaKind::Voice);
    assert_eq!(m.event.text.as_deref(), Some("what is this?"));
}

#[test]
fn what_nobody_asked_is_acknowledged_without_a_run() {
    assert_eq!(skipped(fixture!("bot_message.json")), Skip::Ignored);
    assert_eq!(skipped(fixture!("message_changed.json")), Skip::EditIgnored);
    assert_eq!(
        skipped(fixture!("channel_message.json")),
        Skip::NotAddressed
    );
    assert_eq!(skipped(fixture!("app_rate_limited.json")), Skip::Ignored);
    let dm_mention = br#"{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention",
        "user":"U1","text":"<@U0> hi","ts":"1.000001","channel":"D1"}}"#;
    assert_eq!(skipped(dm_mention), Skip::Ignored);
    let empty = br#"{"type":"event_callback","event":{"type":"message","channel_type":"im",
        "user":"U1","text":"  ","ts":"1.000001","channel":"D1"}}"#;
    assert_eq!(skipped(empty), Skip::Ignored);
    let joined = br#"{"type":"event_callback","event":{"type":"message","subtype":"channel_join",
        "channel_type":"im","user":"U1","text":"joined","ts":"1.000001","channel":"D1"}}"#;
    assert_eq!(skipped(joined), Skip::Ignored);
}

#[test]
fn garbage_is_refused_or_skipped_never_a_panic() {
    for bad in [&b""[..], b"[]", b"{", b"null", b"\"x\""] {
        assert!(parse(bad, Thread).is_err(), "{bad:?}");
    }
    for odd in [
        &br#"{}"#[..],
        br#"{"type":"event_callback"}"#,
        br#"{"type":"event_callback","event":[]}"#,
        br#"{"type":"event_callback","event":{"type":7,"user":[],"ts":{},"channel":null}}"#,
        br#"{"type":"event_callback","event":{"type":"message","channel_type":"im","user":"U1","text":"x","ts":"not-a-ts","channel":"D1"}}"#,
        br#"{"type":"event_callback","event":{"type":"message","channel_type":"im","user":"U1","ts":"1.000001","channel":"D1","files":[1,{"url_private":7}]}}"#,
        br#"{"type":"event_callback","authorizations":"x","event":{"type":"message"}}"#,
    ] {
        assert!(
            matches!(parse(odd, Thread), Ok(Request::Skipped(_))),
            "{}",
            String::from_utf8_lossy(odd)
        );
    }
}

#[test]
fn long_texts_and_many_files_are_bounded() {
    let text = "é".repeat(MAX_TEXT);
    let files: Vec<Value> = (0..MAX_ATTACHMENTS + 5)
        .map(|i| {
            serde_json::json!({"id": format!("F{i}"), "mimetype": "image/png",
            "url_private": format!("https://files.slack.com/{i}.png")})
        })
        .collect();
    let body = serde_json::json!({"type": "event_callback", "event_id": "Ev9",
        "event": {"type": "message", "subtype": "file_share", "channel_type": "im", "user": "U1",
                  "text": text, "ts": "1.000001", "channel": "D1", "files": files}});
    let m = routed(body.to_string().as_bytes(), Thread);
    assert!(m.event.text.unwrap().len() <= crate::MAX_TEXT_BYTES);
    assert_eq!(m.event.media.len(), MAX_ATTACHMENTS);
}

const MAX_TEXT: usize = crate::MAX_TEXT_BYTES;

#[test]
fn a_conversation_id_that_is_not_one_is_not_routed() {
    // Found by the `slack_parse` fuzz target: a `.` in the channel made a chat id that does
    // not read back as a conversation, so its answer could not be sent.
    for channel in ["C0LAN2.Q65", "C1:1515449522.000016", ""] {
        let body = serde_json::json!({
            "type": "event_callback", "event_id": "Ev1",
            "event": {"type": "app_mention", "user": "U061F7AUR", "text": "<@U0LAN0Z89> hi",
                      "ts": "1515449600.000100", "channel": channel}
        });
        assert_eq!(
            skipped(body.to_string().as_bytes()),
            Skip::Ignored,
            "{channel:?}"
        );
    }
}
