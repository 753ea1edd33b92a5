//! Discord end to end (docs/channels.md, "Discord"): interactions signed by PyNaCl, the
//! library Discord's docs verify with (tests/discord/sign.py), through the real route: a
//! `PING` answered `PONG`, a slash command answered with a deferred response and queued once
//! however often it is delivered, and a bad or missing signature refused with nothing queued.

use hermes::Service;
use hermes_bus::Stage;
use hermes_testkit::{TestEnv, drain};
use hermes_types::model::{ChatKind, Inbound, Platform};
use serde_json::{Value, json};

/// The signing key's seed: PyNaCl derives the public key the route is configured with.
const SEED: &str = "7f0e1d2c3b4a59687766554433221100ffeeddccbbaa99887766554433221100";

/// A signed request as PyNaCl made it.
struct Signed {
    public_key: String,
    headers: Vec<(&'static str, String)>,
}

/// `body` signed now by PyNaCl, run with `python`.
fn sign(python: &std::ffi::OsStr, body: &[u8]) -> Signed {
    use std::io::Write as _;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/discord/sign.py");
    let mut child = std::process::Command::new(python)
        .arg(script)
        .env("DISCORD_SIGNING_SEED", SEED)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python runs");
    child.stdin.take().unwrap().write_all(body).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "PyNaCl's script failed");
    let out = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    Signed {
        public_key: lines[0].to_owned(),
        headers: vec![
            ("x-signature-timestamp", lines[1].to_owned()),
            ("x-signature-ed25519", lines[2].to_owned()),
        ],
    }
}

fn ping() -> Vec<u8> {
    let ping =
        json!({"id": "1100", "application_id": "2200", "type": 1, "token": "t", "version": 1});
    serde_json::to_vec(&ping).unwrap()
}

fn ask(id: &str, question: &str) -> Vec<u8> {
    let command = json!({
        "id": id, "application_id": "2200", "type": 2, "token": "interaction-token",
        "version": 1, "guild_id": "3300", "channel_id": "4400",
        "member": {"user": {"id": "5500", "username": "ada"}},
        "data": {"id": "6600", "name": "ask", "type": 1,
                 "options": [{"name": "question", "type": 3, "value": question}]}
    });
    serde_json::to_vec(&command).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_is_ponged_a_command_deferred_and_queued_once_and_a_bad_signature_refused() {
    let Some(python) = std::env::var_os("HERMES_DISCORD_PYTHON") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "PyNaCl is missing: scripts/test installs it (tests/discord/requirements.txt)"
        );
        eprintln!("PyNaCl is not installed: skipped (scripts/test installs it)");
        return;
    };
    let pong = sign(&python, &ping());
    let mut env = TestEnv::new().await;
    env.set("DISCORD_PUBLIC_KEY", &pong.public_key);
    let fleet = env.start(&[Service::Ingest]).await;
    let bus = env.bus().await;

    // Discord checks the endpoint with a signed PING, and needs a PONG back.
    let r = fleet
        .post_webhook("/webhooks/discord", &pong.headers, ping())
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"type": 1}));
    assert!(
        drain(&bus, Stage::Router).await.is_empty(),
        "a PING runs nothing"
    );

    // A slash command: deferred at once, queued as Ada's message; a redelivery once more.
    let body = ask("7700", "What is a river?");
    let signed = sign(&python, &body);
    for _ in 0..2 {
        let r = fleet
            .post_webhook("/webhooks/discord", &signed.headers, body.clone())
            .await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.json::<Value>().await.unwrap(), json!({"type": 5}));
    }
    let routed = drain(&bus, Stage::Router).await;
    assert_eq!(routed.len(), 1, "the command is queued once");
    let message: Inbound = routed[0].payload().unwrap();
    let event = &message.event;
    assert_eq!(event.platform, Platform::Discord);
    assert_eq!(
        (event.sender_id.as_str(), event.chat_id.as_str()),
        ("5500", "4400")
    );
    assert_eq!(event.text.as_deref(), Some("What is a river?"));
    assert_eq!(message.chat_kind, ChatKind::Group);

    // Discord also sends requests signed wrongly, and expects them refused.
    let other = ask("7701", "Another?");
    for headers in [signed.headers.clone(), Vec::new()] {
        let r = fleet
            .post_webhook("/webhooks/discord", &headers, other.clone())
            .await;
        assert_eq!(r.status(), 401);
        assert_eq!(
            r.json::<Value>().await.unwrap()["error"]["code"],
            "invalid_signature"
        );
    }
    assert!(
        drain(&bus, Stage::Router).await.is_empty(),
        "nothing queued"
    );
    fleet.stop().await.unwrap();
}
