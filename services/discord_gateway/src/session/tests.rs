//! The session state machine: Hello → Identify or Resume, heartbeats and zombies, READY,
//! Reconnect, Invalid Session and closes.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;

fn payload(v: Value) -> Payload {
    Payload::parse(&v.to_string()).unwrap()
}

fn session() -> Session {
    Session::new(Shard::new(0, 1).unwrap())
}

fn ready(s: &mut Session, seq: u64) -> Step {
    s.on_payload(&payload(json!({
        "op": 0, "t": "READY", "s": seq,
        "d": {"session_id": "sess-1", "resume_gateway_url": "wss://resume.example",
              "user": {"id": "9900", "username": "hermes"}, "guilds": []}
    })))
}

#[test]
fn hello_gives_the_interval_and_a_new_session_identifies() {
    let mut s = session();
    let step = s.on_payload(&payload(
        json!({"op": 10, "d": {"heartbeat_interval": 41250}}),
    ));
    assert_eq!(step, Step::Hello(Duration::from_millis(41250)));
    assert_eq!(s.opening(), Opening::Identify);
    let gateway = Url::parse("wss://gateway.discord.gg").unwrap();
    assert_eq!(
        s.connect_url(&gateway).as_str(),
        "wss://gateway.discord.gg/?v=10&encoding=json"
    );
    let bad = s.on_payload(&payload(json!({"op": 10, "d": {}})));
    assert!(matches!(bad, Step::Malformed(_)));
}

#[test]
fn ready_keeps_the_session_and_a_reconnect_resumes_it_from_the_last_event_handled() {
    let mut s = session();
    assert_eq!(ready(&mut s, 1), Step::Ready(BotId::new("9900").unwrap()));
    assert_eq!(s.bot().map(BotId::as_str), Some("9900"));
    let step = s.on_payload(&payload(
        json!({"op": 0, "t": "MESSAGE_CREATE", "s": 2, "d": {}}),
    ));
    assert_eq!(
        step,
        Step::Dispatch {
            event: "MESSAGE_CREATE".into(),
            seq: Some(Seq(2))
        }
    );
    // Not handled yet (the broker has not confirmed): a Resume would ask for it again.
    assert_eq!(
        s.opening(),
        Opening::Resume(SessionId("sess-1".into()), Some(Seq(1)))
    );
    s.handled(Some(Seq(2)));
    assert_eq!(
        s.opening(),
        Opening::Resume(SessionId("sess-1".into()), Some(Seq(2)))
    );
    // An older number never moves it back.
    s.handled(Some(Seq(1)));
    assert_eq!(s.seq(), Some(Seq(2)));
    assert_eq!(
        s.on_payload(&payload(json!({"op": 7, "d": null}))),
        Step::Reconnect
    );
    let gateway = Url::parse("wss://gateway.discord.gg").unwrap();
    assert_eq!(
        s.connect_url(&gateway).as_str(),
        "wss://resume.example/?v=10&encoding=json"
    );
    let resumed = s.on_payload(&payload(
        json!({"op": 0, "t": "RESUMED", "s": 3, "d": null}),
    ));
    assert_eq!(resumed, Step::Resumed);
    assert_eq!(s.seq(), Some(Seq(3)));
}

#[test]
fn a_heartbeat_due_before_the_last_was_acknowledged_is_a_zombie() {
    let mut s = session();
    assert_eq!(s.heartbeat_due(), Ok(None));
    assert_eq!(s.on_payload(&payload(json!({"op": 11}))), Step::Ack);
    ready(&mut s, 5);
    assert_eq!(s.heartbeat_due(), Ok(Some(Seq(5))));
    assert_eq!(s.heartbeat_due(), Err(Zombie));
    // A new connection starts with nothing outstanding.
    s.connected();
    assert_eq!(s.heartbeat_due(), Ok(Some(Seq(5))));
    assert_eq!(
        s.on_payload(&payload(json!({"op": 1, "d": null}))),
        Step::HeartbeatNow
    );
}

#[test]
fn an_invalid_session_is_resumed_only_when_discord_says_so_and_one_is_held() {
    let mut s = session();
    ready(&mut s, 1);
    let step = s.on_payload(&payload(json!({"op": 9, "d": true})));
    assert_eq!(step, Step::InvalidSession { resumable: true });
    assert!(s.resumable().is_some());
    let step = s.on_payload(&payload(json!({"op": 9, "d": false})));
    assert_eq!(step, Step::InvalidSession { resumable: false });
    assert_eq!((s.opening(), s.seq()), (Opening::Identify, None));
    // Without a session there is nothing to resume, whatever `d` says.
    let step = s.on_payload(&payload(json!({"op": 9, "d": true})));
    assert_eq!(step, Step::InvalidSession { resumable: false });
}

#[test]
fn closes_resume_identify_or_stop_as_the_code_says() {
    let mut s = session();
    ready(&mut s, 1);
    assert_eq!(s.on_close(1006), CloseKind::Resume);
    assert!(s.resumable().is_some());
    assert_eq!(s.on_close(4009), CloseKind::Identify);
    assert_eq!(s.opening(), Opening::Identify);
    assert_eq!(s.on_close(4004), CloseKind::Fatal);
    assert_eq!(s.on_close(4014), CloseKind::Fatal);
}

#[test]
fn a_bad_ready_and_a_nameless_dispatch_are_malformed() {
    let mut s = session();
    let bad = s.on_payload(&payload(json!({
        "op": 0, "t": "READY", "s": 1,
        "d": {"session_id": "x", "resume_gateway_url": "https://not-ws", "user": {"id": "9900"}}
    })));
    assert!(matches!(bad, Step::Malformed(_)));
    assert!(s.resumable().is_none());
    let nameless = s.on_payload(&payload(json!({"op": 0, "s": 2, "d": {}})));
    assert!(matches!(nameless, Step::Malformed(_)));
    assert_eq!(s.on_payload(&payload(json!({"op": 3}))), Step::Ignored);
}

#[test]
fn a_resume_url_in_clear_is_not_taken_when_the_gateway_is_reached_over_tls() {
    let mut s = session();
    s.on_payload(&payload(json!({
        "op": 0, "t": "READY", "s": 1,
        "d": {"session_id": "sess-1", "resume_gateway_url": "ws://plain.example",
              "user": {"id": "9900"}}
    })));
    let tls = Url::parse("wss://gateway.discord.gg").unwrap();
    assert_eq!(s.connect_url(&tls).host_str(), Some("gateway.discord.gg"));
    let plain = Url::parse("ws://127.0.0.1:9").unwrap();
    assert_eq!(s.connect_url(&plain).host_str(), Some("plain.example"));
}
