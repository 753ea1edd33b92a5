//! Interactions as Discord documents them: a ping, a slash command in a guild and in a DM.

use serde_json::json;

use super::*;

fn read(v: serde_json::Value) -> Result<Interaction, ParseError> {
    parse(v.to_string().as_bytes())
}

fn command(v: serde_json::Value) -> Command {
    match read(v).expect("parses") {
        Interaction::Command(c) => *c,
        other => panic!("not a command: {other:?}"),
    }
}

#[test]
fn a_ping_is_a_ping() {
    let ping = json!({"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1});
    assert_eq!(read(ping).expect("parses"), Interaction::Ping);
}

#[test]
fn a_slash_command_in_a_guild_is_read_with_its_member() {
    let c = command(json!({
        "id": "1001", "application_id": "2002", "type": 2, "token": "tok", "version": 1,
        "guild_id": "3003", "channel_id": "4004", "channel": {"id": "4004", "type": 0},
        "member": {"user": {"id": "5005", "username": "ada"}, "roles": []},
        "data": {"id": "6006", "name": "ask", "type": 1,
                 "options": [{"name": "question", "type": 3, "value": "What is 2+2?"}]}
    }));
    assert_eq!(c.id, "1001");
    assert_eq!(c.application_id, "2002");
    assert_eq!(c.token, "tok");
    assert_eq!(c.user_id, "5005");
    assert_eq!(c.user_name.as_deref(), Some("ada"));
    assert_eq!(c.channel_id, "4004");
    assert_eq!(c.guild_id.as_deref(), Some("3003"));
    assert_eq!(c.name, "ask");
    assert_eq!(c.text, "What is 2+2?");
}

#[test]
fn a_dm_command_names_its_user_and_subcommand_strings_are_found() {
    let c = command(json!({
        "id": "1", "application_id": "2", "type": 2, "token": "t", "channel_id": "9",
        "user": {"id": "7"},
        "data": {"name": "agent", "options": [{"name": "ask", "type": 1, "options": [
            {"name": "n", "type": 4, "value": 3},
            {"name": "q", "type": 3, "value": "hello"}]}]}
    }));
    assert_eq!((c.user_id.as_str(), c.guild_id), ("7", None));
    assert_eq!(c.text, "hello");
}

#[test]
fn a_command_without_strings_is_its_name() {
    let c = command(json!({
        "id": "1", "application_id": "2", "type": 2, "token": "t", "channel_id": "9",
        "user": {"id": "7"}, "data": {"name": "help"}
    }));
    assert_eq!(c.text, "/help");
}

#[test]
fn other_types_are_not_routed() {
    let button = json!({"id": "1", "application_id": "2", "type": 3, "token": "t"});
    assert_eq!(
        read(button).expect("parses"),
        Interaction::Other(Kind::Other(3))
    );
}

#[test]
fn a_command_without_user_or_token_is_malformed() {
    let no_user = json!({"id": "1", "application_id": "2", "type": 2, "token": "t",
                         "channel_id": "9", "data": {"name": "ask"}});
    assert!(matches!(read(no_user), Err(ParseError::Shape(_))));
    let no_token = json!({"id": "1", "application_id": "2", "type": 2, "channel_id": "9",
                          "user": {"id": "7"}, "data": {"name": "ask"}});
    assert!(matches!(read(no_token), Err(ParseError::Shape(_))));
    let long = "a".repeat(1025);
    for bad in ["a/b", "a?b", "a b", long.as_str()] {
        let c = json!({"id": "1", "application_id": "2", "type": 2, "token": bad,
                       "channel_id": "9", "user": {"id": "7"}, "data": {"name": "ask"}});
        assert!(matches!(read(c), Err(ParseError::Shape(_))), "{bad:?}");
    }
    assert!(read(json!([1])).is_err());
    assert!(parse(b"{").is_err());
}

#[test]
fn ids_that_are_not_snowflakes_are_malformed() {
    for bad in ["", "12a", "99999999999999999999", "-1"] {
        let c = json!({"id": "1", "application_id": "2", "type": 2, "token": "t",
                       "channel_id": "9", "user": {"id": bad}, "data": {"name": "ask"}});
        assert!(matches!(read(c), Err(ParseError::Shape(_))), "{bad:?}");
    }
}
