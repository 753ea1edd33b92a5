//! Teams' activities, from the shapes of Microsoft's published examples.

use hermes_types::model::MediaKind;

use super::*;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/teams/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(path).unwrap()
}

fn message(name: &str) -> Inbound {
    match parse(&fixture(name)).unwrap() {
        Request::Message(m) => *m,
        Request::Skipped(why) => panic!("{name}: skipped as {why:?}"),
    }
}

#[test]
fn a_personal_message_is_routed_to_its_conversation_on_its_service() {
    let m = message("personal");
    let e = &m.event;
    assert_eq!(e.platform, Platform::Teams);
    assert_eq!(e.text.as_deref(), Some("Hello, what can you do?"));
    assert_eq!(e.sender_name.as_deref(), Some("Megan Bowen"));
    assert!(e.sender_id.starts_with("29:1XJK"));
    assert_eq!(e.external_message_id.as_deref(), Some("1732819212345"));
    let chat = TeamsChat::parse(&e.chat_id).unwrap();
    assert_eq!(
        chat.service_url.as_str(),
        "https://smba.trafficmanager.net/amer/"
    );
    assert!(chat.conversation.starts_with("a:17I0kl8"));
    assert_eq!((m.chat_kind, m.quote), (ChatKind::Direct, None));
    assert_eq!(e.received_at.timestamp(), 1_795_891_212);
}

#[test]
fn in_a_channel_only_a_mention_of_the_bot_is_answered_as_a_reply() {
    let m = message("channel_mention");
    assert_eq!(m.event.text.as_deref(), Some("summarize this thread"));
    assert_eq!(m.chat_kind, ChatKind::Group);
    assert_eq!(m.quote.as_deref(), Some("1732819260000"));
    assert!(
        m.event
            .chat_id
            .ends_with("|19:e6c4b8a1d7f24bbfa0c3@thread.tacv2;messageid=1732819260000")
    );
    assert!(matches!(
        parse(&fixture("channel_unaddressed")).unwrap(),
        Request::Skipped(Skip::NotAddressed)
    ));
    // A mention of someone else does not address the bot.
    let mut other: Value = serde_json::from_slice(&fixture("channel_mention")).unwrap();
    other["entities"][0]["mentioned"]["id"] = "29:someone".into();
    assert!(matches!(
        parse(other.to_string().as_bytes()).unwrap(),
        Request::Skipped(Skip::NotAddressed)
    ));
}

#[test]
fn files_and_inline_images_are_referenced_and_cards_are_not() {
    let m = message("file");
    assert_eq!(m.event.text, None);
    let media = &m.event.media;
    assert_eq!(media.len(), 2);
    assert_eq!(media[0].kind, MediaKind::Image);
    assert_eq!(media[0].mime_type.as_deref(), Some("image/png"));
    assert!(media[0].url.as_deref().unwrap().contains("download.aspx"));
    assert_eq!(media[1].kind, MediaKind::Image);
    assert_eq!(media[1].mime_type, None, "image/* names no type");
    assert!(
        media[1]
            .url
            .as_deref()
            .unwrap()
            .starts_with("https://smba.")
    );
}

#[test]
fn other_activities_and_broken_ones_are_skipped_and_garbage_is_an_error() {
    assert!(matches!(
        parse(&fixture("conversation_update")).unwrap(),
        Request::Skipped(Skip::Ignored)
    ));
    for body in [
        r#"{"type":"message"}"#,
        r#"{"type":"message","id":"1","serviceUrl":"not a url","from":{"id":"29:1"},"conversation":{"id":"a:1"},"text":"hi"}"#,
        r#"{"type":"message","id":"1","serviceUrl":"https://s/","from":{"id":"29:1"},"conversation":{"id":"a|1"},"text":"hi"}"#,
        r#"{"type":"message","id":"1","serviceUrl":"https://s/","from":{"id":"28:b"},"recipient":{"id":"28:b"},"conversation":{"id":"a:1"},"text":"hi"}"#,
        r#"{"type":"message","id":"1","serviceUrl":"https://s/","from":{"id":"29:1"},"conversation":{"id":"a:1"},"text":"  "}"#,
        r#"{"type":7,"id":[],"entities":"x","attachments":{}}"#,
    ] {
        assert!(
            matches!(parse(body.as_bytes()), Ok(Request::Skipped(_)) | Err(_)),
            "{body}"
        );
    }
    assert!(parse(b"[]").is_err());
    assert!(parse(b"\xff").is_err());
    assert_eq!(
        service_url(&fixture("personal")).as_deref(),
        Some("https://smba.trafficmanager.net/amer/")
    );
}
