//! The `MESSAGE_CREATE` parser: who is answered, what they sent, and what is refused.

use hermes_types::model::{ChatKind, MediaKind, Platform};
use serde_json::{Value, json};

use super::*;

const BOT: &str = "9900";

fn bot() -> BotId {
    BotId::new(BOT).unwrap()
}

fn dm(content: &str) -> Value {
    json!({
        "id": "1234567890", "channel_id": "4400", "type": 0, "content": content,
        "timestamp": "2026-11-29T04:00:00.000000+00:00",
        "author": {"id": "5500", "username": "ada", "global_name": "Ada"},
        "mentions": [], "attachments": []
    })
}

fn parsed(v: &Value) -> Message {
    parse_message(&serde_json::to_vec(v).unwrap(), &bot()).unwrap()
}

fn skipped(v: &Value) -> Skipped {
    match parsed(v) {
        Message::Skipped(why) => why,
        other => panic!("not skipped: {other:?}"),
    }
}

fn routed(v: &Value) -> Inbound {
    match parsed(v) {
        Message::Routed(m) => *m,
        other => panic!("not routed: {other:?}"),
    }
}

#[test]
fn a_direct_message_is_routed_to_its_channel_with_its_id_as_the_dedupe_key() {
    let m = routed(&dm("What is a river?"));
    let e = &m.event;
    assert_eq!(e.platform, Platform::Discord);
    assert_eq!((e.sender_id.as_str(), e.chat_id.as_str()), ("5500", "4400"));
    assert_eq!(e.text.as_deref(), Some("What is a river?"));
    assert_eq!(e.external_message_id.as_deref(), Some("1234567890"));
    assert_eq!(e.sender_name.as_deref(), Some("Ada"));
    assert_eq!(e.received_at.to_rfc3339(), "2026-11-29T04:00:00+00:00");
    assert_eq!(m.chat_kind, ChatKind::Direct);
    assert!(
        m.interaction.is_none(),
        "answered in the channel with the bot token"
    );
}

#[test]
fn a_guild_message_is_routed_only_when_it_mentions_or_replies_to_the_bot() {
    let mut v = dm("hello all");
    v["guild_id"] = json!("3300");
    assert_eq!(skipped(&v), Skipped::NotAddressed);

    v["content"] = json!("<@9900> what is a river?");
    v["mentions"] = json!([{"id": BOT, "username": "hermes"}]);
    v["member"] = json!({"nick": "Countess"});
    let m = routed(&v);
    assert_eq!(m.event.text.as_deref(), Some("what is a river?"));
    assert_eq!(m.event.sender_name.as_deref(), Some("Countess"));
    assert_eq!(m.chat_kind, ChatKind::Group);

    // The nickname form of the mention is taken out too.
    v["content"] = json!("<@!9900> and a lake?");
    assert_eq!(routed(&v).event.text.as_deref(), Some("and a lake?"));

    // Someone else mentioned: not addressed.
    v["mentions"] = json!([{"id": "7777"}]);
    assert_eq!(skipped(&v), Skipped::NotAddressed);

    // A reply to the bot's message addresses it.
    v["type"] = json!(19);
    v["referenced_message"] = json!({"id": "1", "author": {"id": BOT}});
    assert!(matches!(parsed(&v), Message::Routed(_)));
}

#[test]
fn the_bots_own_messages_other_bots_and_webhooks_are_never_answered() {
    let mut v = dm("an answer");
    v["author"]["id"] = json!(BOT);
    assert_eq!(skipped(&v), Skipped::Own);
    let mut v = dm("beep");
    v["author"]["bot"] = json!(true);
    assert_eq!(skipped(&v), Skipped::Bot);
    let mut v = dm("hook");
    v["webhook_id"] = json!("8800");
    assert_eq!(skipped(&v), Skipped::Bot);
}

#[test]
fn system_messages_and_empty_ones_are_skipped() {
    let mut v = dm("joined");
    v["type"] = json!(7);
    assert_eq!(skipped(&v), Skipped::Empty);
    assert_eq!(skipped(&dm("   ")), Skipped::Empty);
}

#[test]
fn attachments_are_media_by_content_type_and_only_web_urls_are_kept() {
    let mut v = dm("");
    v["attachments"] = json!([
        {"id": "1", "url": "https://cdn.discordapp.com/a/1/cat.png", "content_type": "image/png"},
        {"id": "2", "url": "https://cdn.discordapp.com/a/2/voice.ogg", "content_type": "audio/ogg"},
        {"id": "3", "url": "https://cdn.discordapp.com/a/3/notes.pdf"},
        {"id": "4", "url": "file:///etc/passwd", "content_type": "image/png"},
        {"id": "5", "url": "ftp://cdn.discordapp.com/a/5/cat.png", "content_type": "image/png"},
        "not an attachment"
    ]);
    let m = routed(&v);
    let kinds: Vec<MediaKind> = m.event.media.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [MediaKind::Image, MediaKind::Voice, MediaKind::Document]
    );
    assert_eq!(m.event.media[0].platform_id.as_deref(), Some("1"));
    assert_eq!(m.event.text, None);
}

#[test]
fn ids_that_are_not_snowflakes_and_bodies_of_another_shape_are_refused() {
    let mut v = dm("hi");
    v["channel_id"] = json!("../../guilds/1");
    assert!(parse_message(&serde_json::to_vec(&v).unwrap(), &bot()).is_err());
    for body in [&b"[]"[..], b"{}", b"not json", b"{\"id\":1}"] {
        assert!(parse_message(body, &bot()).is_err(), "{body:?}");
    }
    assert!(BotId::new("hermes").is_none());
}
