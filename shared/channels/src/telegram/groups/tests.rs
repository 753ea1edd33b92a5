//! Tests of [`super`]: Telegram's published payloads for group messages and edits, parsed
//! and judged under each rule.

use serde_json::json;

use super::*;
use crate::inbound::Skip;
use crate::telegram::parse::{self, Update};

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../../tests/fixtures/telegram/", $name, ".json"))
    };
}

const TOKEN: &str = "7000000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";

fn parsed(body: &str) -> Update {
    parse::parse(body.as_bytes()).expect("parses")
}

/// The bot known as `name`.
fn settings(name: &str) -> TelegramSettings {
    TelegramSettings {
        bot_username: Some(name.into()),
        ..TelegramSettings::default()
    }
}

fn named() -> TelegramSettings {
    settings("hermes_test_bot")
}

/// `body` judged under `settings`, the bot known by name and token.
fn judged(body: &str, s: &TelegramSettings) -> Result<Inbound, Skip> {
    let u = parsed(body);
    admit(
        u.event.expect("an event"),
        u.addressing.as_ref().expect("its facts"),
        s,
        &Bot::new(s, Some(TOKEN)),
    )
}

#[test]
fn a_mention_is_read_from_utf16_offsets_and_taken_out_of_the_text() {
    let u = parsed(fixture!("group_mention"));
    let facts = u.addressing.unwrap();
    assert_eq!(facts.chat_type, ChatType::Supergroup);
    assert_eq!(facts.message_id, 501);
    let text = u.event.unwrap().text.unwrap();
    assert_eq!(&text[facts.mentions[0].range.clone()], "@hermes_test_bot");

    let inbound = judged(fixture!("group_mention"), &named()).unwrap();
    assert_eq!(
        inbound.event.text.as_deref(),
        Some("🌦 hey, what's the weather in Zürich tomorrow?")
    );
    assert_eq!(inbound.chat_kind, ChatKind::Group);
    assert_eq!(inbound.quote.as_deref(), Some("501"));
    assert_eq!(inbound.reply_to().quote.as_deref(), Some("501"));
    // The dedupe key is the message's, as before.
    assert_eq!(
        inbound.event.external_message_id.as_deref(),
        Some("-1001234567890:501")
    );
}

#[test]
fn a_group_message_for_someone_else_is_not_answered() {
    assert_eq!(
        judged(fixture!("group_no_mention"), &named()).unwrap_err(),
        Skip::NotAddressed
    );
    // The published example without entities at all.
    assert_eq!(
        judged(fixture!("group_username_only"), &named()).unwrap_err(),
        Skip::NotAddressed
    );
    // A bot named differently is not this one, whatever the case.
    let other = settings("alice_k");
    assert!(judged(fixture!("group_no_mention"), &other).is_ok());
    let upper = settings("@HERMES_TEST_BOT");
    assert!(judged(fixture!("group_mention"), &upper).is_ok());
}

#[test]
fn a_reply_to_the_bot_is_answered_by_its_name_or_its_token_id() {
    let inbound = judged(fixture!("group_reply_to_bot"), &named()).unwrap();
    assert_eq!(inbound.event.text.as_deref(), Some("and the day after?"));
    assert_eq!(inbound.quote.as_deref(), Some("504"));
    // No username configured: the token's id still knows the bot.
    let unnamed = TelegramSettings::default();
    let u = parsed(fixture!("group_reply_to_bot"));
    let event = u.event.unwrap();
    let facts = u.addressing.unwrap();
    assert!(
        admit(
            event.clone(),
            &facts,
            &unnamed,
            &Bot::new(&unnamed, Some(TOKEN))
        )
        .is_ok()
    );
    assert_eq!(
        admit(event, &facts, &unnamed, &Bot::default()).unwrap_err(),
        Skip::NotAddressed,
        "a bot known by neither name nor id cannot tell a reply to it"
    );
    // A reply to another member is not for the bot.
    let body = json!({"update_id": 1, "message": {"message_id": 9, "date": 1700000000,
        "chat": {"id": -5, "type": "group"}, "from": {"id": 2, "is_bot": false},
        "reply_to_message": {"message_id": 8, "chat": {"id": -5, "type": "group"},
            "from": {"id": 3, "is_bot": false, "username": "hermes_test_bot"}},
        "text": "agreed"}});
    assert_eq!(
        judged(&body.to_string(), &named()).unwrap_err(),
        Skip::NotAddressed
    );
}

#[test]
fn a_command_for_the_bot_or_every_bot_is_answered_one_for_another_bot_is_not() {
    let inbound = judged(fixture!("group_command"), &named()).unwrap();
    assert_eq!(inbound.event.text.as_deref(), Some("/weather Berlin"));
    let command = |text: &str, len: usize| {
        json!({"update_id": 1, "message": {"message_id": 9, "date": 1700000000,
            "chat": {"id": -5, "type": "group"}, "from": {"id": 2},
            "text": text, "entities": [{"type": "bot_command", "offset": 0, "length": len}]}})
        .to_string()
    };
    let bare = judged(&command("/help", 5), &named()).unwrap();
    assert_eq!(bare.event.text.as_deref(), Some("/help"));
    assert_eq!(
        judged(&command("/start@other_bot", 16), &named()).unwrap_err(),
        Skip::NotAddressed
    );
    // A command further in the text does not address anyone.
    let late = json!({"update_id": 1, "message": {"message_id": 9, "date": 1700000000,
        "chat": {"id": -5, "type": "group"}, "from": {"id": 2},
        "text": "try /help", "entities": [{"type": "bot_command", "offset": 4, "length": 5}]}});
    assert_eq!(
        judged(&late.to_string(), &named()).unwrap_err(),
        Skip::NotAddressed
    );
}

#[test]
fn a_text_mention_names_the_bot_by_id() {
    let body = json!({"update_id": 1, "message": {"message_id": 9, "date": 1700000000,
        "chat": {"id": -5, "type": "supergroup"}, "from": {"id": 2},
        "text": "Hermes, ping",
        "entities": [{"type": "text_mention", "offset": 0, "length": 6,
                      "user": {"id": 7000000001_i64, "is_bot": true, "first_name": "Hermes"}}]}});
    let inbound = judged(&body.to_string(), &named()).unwrap();
    assert_eq!(inbound.event.text.as_deref(), Some("ping"));
}

#[test]
fn each_group_follows_its_own_rule() {
    let s = TelegramSettings {
        group_answer: GroupAnswer::Never,
        groups: [(
            "-1001234567890".to_string(),
            hermes_config::GroupSettings {
                answer: GroupAnswer::All,
            },
        )]
        .into(),
        ..named()
    };
    // `all`: answered without a mention, quoted, text as written.
    let inbound = judged(fixture!("group_no_mention"), &s).unwrap();
    assert_eq!(
        inbound.event.text.as_deref(),
        Some("anyone up for lunch? cc @alice_k")
    );
    assert_eq!(inbound.quote.as_deref(), Some("502"));
    // Another group falls back to `never`: not even a reply to the bot.
    assert_eq!(
        judged(fixture!("group_reply_to_bot"), &s).unwrap_err(),
        Skip::GroupSilent
    );
}

#[test]
fn private_chats_are_always_answered_unquoted() {
    let inbound = judged(fixture!("text"), &named()).unwrap();
    assert_eq!(inbound.chat_kind, ChatKind::Direct);
    assert_eq!(inbound.quote, None);
    assert_eq!(inbound.event.text.as_deref(), Some("/start"));
}

#[test]
fn an_edit_is_ignored_by_default_and_answered_as_a_correction_when_configured() {
    assert_eq!(
        judged(fixture!("edited_message"), &named()).unwrap_err(),
        Skip::EditIgnored
    );
    let answer = TelegramSettings {
        edits: EditPolicy::Answer,
        ..named()
    };
    let inbound = judged(fixture!("edited_message"), &answer).unwrap();
    assert_eq!(inbound.event.text.as_deref(), Some("(edited) fixed typo"));
    // One key per edit: a redelivered edit is a duplicate, a later edit is new.
    assert_eq!(
        inbound.event.external_message_id.as_deref(),
        Some("1111111:1365:edit:1441645600")
    );
    // In a group the edit is judged like any message there, and quotes it.
    let inbound = judged(fixture!("group_edited_mention"), &answer).unwrap();
    assert_eq!(
        inbound.event.text.as_deref(),
        Some("(edited) what's the weather in Zurich on Sunday?")
    );
    assert_eq!(inbound.quote.as_deref(), Some("501"));
    assert_eq!(
        inbound.event.external_message_id.as_deref(),
        Some("-1001234567890:501:edit:1700000460")
    );
}

#[test]
fn a_message_that_is_only_the_mention_keeps_it() {
    let body = json!({"update_id": 1, "message": {"message_id": 9, "date": 1700000000,
        "chat": {"id": -5, "type": "group"}, "from": {"id": 2},
        "text": "@hermes_test_bot", "entities": [{"type": "mention", "offset": 0, "length": 16}]}});
    let inbound = judged(&body.to_string(), &named()).unwrap();
    assert_eq!(inbound.event.text.as_deref(), Some("@hermes_test_bot"));
}

#[test]
fn a_caption_mention_counts_and_bad_entities_are_skipped() {
    let body = json!({"update_id": 1, "message": {"message_id": 9, "date": 1700000000,
        "chat": {"id": -5, "type": "group"}, "from": {"id": 2},
        "photo": [{"file_id": "p"}], "caption": "@hermes_test_bot what is this?",
        "caption_entities": [{"type": "mention", "offset": 0, "length": 16}]}});
    let inbound = judged(&body.to_string(), &named()).unwrap();
    assert_eq!(inbound.event.text.as_deref(), Some("what is this?"));
    // Offsets past the text, negative, inside a surrogate pair or empty: no mention, no panic.
    for (offset, length) in [
        (100, 3),
        (-1, 3),
        (0, 0),
        (1, 3),
        (0, i64::MAX),
        (i64::MAX, 1),
    ] {
        let body = json!({"update_id": 1, "message": {"message_id": 9, "chat": {"id": -5, "type": "group"},
            "text": "😀 hi", "entities": [{"type": "mention", "offset": offset, "length": length}]}});
        let u = parsed(&body.to_string());
        assert!(
            u.addressing.unwrap().mentions.is_empty(),
            "{offset},{length}"
        );
    }
}

#[test]
fn utf16_ranges_land_on_characters() {
    assert_eq!(byte_range("a😀b", Some(1), Some(2)), Some(1..5));
    assert_eq!(byte_range("a😀b", Some(3), Some(1)), Some(5..6));
    assert_eq!(byte_range("a😀b", Some(2), Some(1)), None);
    assert_eq!(byte_range("ab", Some(0), Some(2)), Some(0..2));
    assert_eq!(byte_range("ab", Some(0), Some(3)), None);
}

#[test]
fn any_entities_on_any_text_never_panic_and_only_take_text_out() {
    // A small deterministic generator: the same cases on every run.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let pool = [
        "@hermes_test_bot",
        " ",
        ",",
        "😀",
        "é",
        "hi",
        "/go",
        "@x",
        "\n",
    ];
    let kinds = ["mention", "text_mention", "bot_command", "bold"];
    for _ in 0..3000 {
        let text: String = (0..next(8))
            .map(|_| pool[next(pool.len() as u64) as usize])
            .collect();
        let entities: Vec<_> = (0..next(4))
            .map(|_| {
                json!({"type": kinds[next(4) as usize], "offset": next(30) as i64 - 2,
                       "length": next(20) as i64 - 2,
                       "user": {"id": 7000000001_i64, "is_bot": true}})
            })
            .collect();
        let body = json!({"update_id": 1, "message": {"message_id": 9, "date": 1700000000,
            "chat": {"id": -5, "type": "group"}, "from": {"id": 2},
            "text": text, "entities": entities}});
        let u = parsed(&body.to_string());
        let (Some(event), Some(facts)) = (u.event, u.addressing) else {
            continue;
        };
        let original = event.text.clone().unwrap_or_default();
        if let Ok(inbound) = admit(event, &facts, &named(), &Bot::new(&named(), Some(TOKEN))) {
            let kept = inbound.event.text.unwrap_or_default();
            assert!(!kept.trim().is_empty() || original.trim().is_empty());
            // Only characters of the original, in order.
            let mut rest = original.chars();
            assert!(
                kept.chars().all(|c| rest.any(|o| o == c)),
                "{original:?} -> {kept:?}"
            );
        }
    }
}
