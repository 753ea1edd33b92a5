//! The route's answers: a `PONG` to a `PING`, a deferred response and one message to a
//! command, nothing routed for other interactions, and refusals without a good signature.

use http::{HeaderMap, HeaderValue};
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde_json::json;

use super::*;
use crate::inbound::Webhook as _;

fn pair() -> Ed25519KeyPair {
    Ed25519KeyPair::from_seed_unchecked(&[3; 32]).expect("seed")
}

fn hook() -> Webhook {
    let key = PublicKey::from_hex(&hex::encode(pair().public_key().as_ref()));
    Webhook::with_key(key, 64 * 1024)
}

fn signed(body: &[u8]) -> HeaderMap {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        .to_string();
    let (_, signature) = verify::sign(&[3; 32], &timestamp, body).expect("a seed");
    let mut h = HeaderMap::new();
    h.insert(
        verify::SIGNATURE,
        HeaderValue::from_str(&signature).expect("hex"),
    );
    h.insert(
        verify::TIMESTAMP,
        HeaderValue::from_str(&timestamp).expect("digits"),
    );
    h
}

#[test]
fn a_ping_is_answered_pong_and_routes_nothing() {
    let body = json!({"id": "1", "application_id": "2", "type": 1, "token": "t"}).to_string();
    let h = signed(body.as_bytes());
    assert_eq!(hook().check_headers(&h, None), Ok(()));
    assert_eq!(hook().check_body(&h, body.as_bytes()), Ok(()));
    let got = hook().parse(body.as_bytes()).expect("parses");
    assert!(got.messages.is_empty());
    let answer = got.answer.expect("an answer");
    assert_eq!(answer.content_type, "application/json");
    assert_eq!(answer.body, r#"{"type":1}"#);
}

#[test]
fn a_guild_command_is_deferred_and_routed_from_its_member() {
    let body = json!({
        "id": "1001", "application_id": "2", "type": 2, "token": "t", "guild_id": "3",
        "channel_id": "4", "member": {"user": {"id": "5", "username": "ada"}},
        "data": {"name": "ask", "options": [{"name": "q", "type": 3, "value": "hi there"}]}
    })
    .to_string();
    let got = hook().parse(body.as_bytes()).expect("parses");
    assert_eq!(got.answer.expect("an answer").body, r#"{"type":5}"#);
    let [m] = got.messages.as_slice() else {
        panic!("one message: {:?}", got.messages);
    };
    assert_eq!(m.event.platform, Platform::Discord);
    assert_eq!(
        (m.event.sender_id.as_str(), m.event.chat_id.as_str()),
        ("5", "4")
    );
    assert_eq!(m.event.text.as_deref(), Some("hi there"));
    assert_eq!(m.event.external_message_id.as_deref(), Some("1001"));
    assert_eq!(m.chat_kind, ChatKind::Group);
    let interaction = m.interaction.as_ref().expect("the interaction travels");
    assert_eq!(interaction.application_id, "2");
    assert_eq!(interaction.token.expose(), "t");
    assert_eq!(m.reply_to().interaction.as_ref(), Some(interaction));
}

#[test]
fn a_dm_command_is_direct_and_other_interactions_are_skipped() {
    let dm = json!({"id": "1", "application_id": "2", "type": 2, "token": "t",
                    "channel_id": "9", "user": {"id": "7"}, "data": {"name": "help"}});
    let got = hook().parse(dm.to_string().as_bytes()).expect("parses");
    assert_eq!(got.messages[0].chat_kind, ChatKind::Direct);
    let button = json!({"id": "1", "application_id": "2", "type": 3, "token": "t"});
    let got = hook().parse(button.to_string().as_bytes()).expect("parses");
    assert!(got.messages.is_empty() && got.answer.is_none());
    assert_eq!(got.skipped, vec![(Skip::Ignored, 1)]);
}

#[test]
fn a_bad_signature_is_refused_and_no_key_is_off() {
    let body = br#"{"id":"1","application_id":"2","type":1,"token":"t"}"#;
    let h = signed(b"something else");
    assert_eq!(hook().check_body(&h, body), Err(Refusal::BadSignature));
    let off = Webhook::with_key(None, 1024);
    assert!(!off.enabled());
    assert_eq!(off.check_headers(&h, None), Err(Refusal::Off));
    assert_eq!(hook().ack_within(), Some(ACK_WITHIN));
}
