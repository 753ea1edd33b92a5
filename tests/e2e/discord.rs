//! Discord end to end (docs/channels.md, "Discord"): interactions signed by PyNaCl, the
//! library Discord's docs verify with (tests/discord/sign.py), through the real route: a
//! `PING` answered `PONG`, a slash command answered with a deferred response and queued once
//! however often it is delivered, and a bad or missing signature refused with nothing queued.
//! Through the whole fleet into a fake of Discord's API: the answer edits the deferred
//! response once, a long one follows up, a 429 is waited out, and an expired token parks the
//! reply with its reason.

use std::time::{Duration, Instant};

use hermes::Service;
use hermes_bus::Stage;
use hermes_testkit::{
    App, DiscordCall, TestEnv, count, discord_api_url, discord_calls, discord_fake,
    discord_rate_limited, discord_route, discord_unknown_webhook, drain, eventually, openai_answer,
};
use hermes_types::model::{ChatKind, Inbound, Platform};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::delivery::parked_one;

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
    ask_on("interaction-token", id, question)
}

/// A slash command `/ask question:…` from Ada in a guild channel, with the interaction
/// token `token`.
fn ask_on(token: &str, id: &str, question: &str) -> Vec<u8> {
    let command = json!({
        "id": id, "application_id": "2200", "type": 2, "token": token,
        "version": 1, "guild_id": "3300", "channel_id": "4400",
        "member": {"user": {"id": "5500", "username": "ada"}},
        "data": {"id": "6600", "name": "ask", "type": 1,
                 "options": [{"name": "question", "type": 3, "value": question}]}
    });
    serde_json::to_vec(&command).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_is_ponged_a_command_deferred_and_queued_once_and_a_bad_signature_refused() {
    let Some(python) = pynacl() else { return };
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

/// PyNaCl's interpreter, or `None` (and a note) where it is not installed outside CI.
fn pynacl() -> Option<std::ffi::OsString> {
    let python = std::env::var_os("HERMES_DISCORD_PYTHON");
    if python.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "PyNaCl is missing: scripts/test installs it (tests/discord/requirements.txt)"
        );
        eprintln!("PyNaCl is not installed: skipped (scripts/test installs it)");
    }
    python
}

/// An environment answering Discord through `api`, with the fake model `model`, Ada linked.
async fn discord_env(python: &std::ffi::OsStr, model: &MockServer, api: &MockServer) -> TestEnv {
    let mut env = TestEnv::new().await;
    env.openai_mock(&model.uri())
        .set("DISCORD_PUBLIC_KEY", &sign(python, &ping()).public_key)
        .set("DISCORD_API_URL", &discord_api_url(api))
        .set("HERMES_SEND_PAUSES_MS", "10,10,10");
    env.user(Platform::Discord, "5500", 10).await;
    env
}

/// POST `body` to the Discord route, signed now by PyNaCl; Discord's deferred answer expected.
async fn command(app: &App, python: &std::ffi::OsStr, body: Vec<u8>) {
    let signed = sign(python, &body);
    let r = app
        .post_webhook("/webhooks/discord", &signed.headers, body)
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"type": 5}));
}

/// Wait until the fake has seen `n` calls on interaction token `token`; those calls.
async fn calls_on(api: &MockServer, token: &str, n: usize) -> Vec<DiscordCall> {
    let on = format!("/{token}");
    eventually(Duration::from_secs(30), "Discord's calls", || async {
        let calls: Vec<DiscordCall> = (discord_calls(api).await.into_iter())
            .filter(|c| c.path.contains(&on))
            .collect();
        (calls.len() >= n).then_some(calls)
    })
    .await
}

/// Wait until `n` runs are closed with `status`.
async fn closed(env: &TestEnv, status: &str, n: i64) {
    eventually(Duration::from_secs(30), "the runs closed", || async {
        let sql = "SELECT count(*) FROM agent_runs WHERE status = $1";
        (count(&env.db(), sql, &[&status]).await >= n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_is_answered_on_its_deferred_response_once_and_a_long_answer_follows_up() {
    let Some(python) = pynacl() else { return };
    let model = MockServer::start().await;
    let long = format!("{}\n\n{}", "a".repeat(1900), "b ".repeat(1050));
    Mock::given(method("POST"))
        .and(body_string_contains("at length"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(&long, 1, 1)))
        .with_priority(1)
        .mount(&model)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(
            "A river is water @everyone sees flow.",
            1,
            1,
        )))
        .with_priority(2)
        .mount(&model)
        .await;
    let api = discord_fake().await;
    let env = discord_env(&python, &model, &api).await;
    let fleet = env.start(&Service::ALL).await;

    // Discord delivers the command twice: one answer, the deferred response edited.
    let body = ask_on("tok-short", "7800", "What is a river?");
    command(&fleet, &python, body.clone()).await;
    command(&fleet, &python, body).await;
    let calls = calls_on(&api, "tok-short", 1).await;
    assert_eq!(calls[0].method, "PATCH");
    assert_eq!(calls[0].path, "/webhooks/2200/tok-short/messages/@original");
    assert_eq!(
        calls[0].body,
        json!({"content": "A river is water @everyone sees flow.",
               "allowed_mentions": {"parse": []}})
    );
    assert_eq!(
        calls[0].authorization, None,
        "a follow-up needs no bot token"
    );

    // A long answer: its first 2,000 characters edit the response, the rest follow up.
    command(
        &fleet,
        &python,
        ask_on("tok-long", "7801", "Tell me at length"),
    )
    .await;
    let calls = calls_on(&api, "tok-long", 3).await;
    let methods: Vec<&str> = calls.iter().map(|c| c.method.as_str()).collect();
    assert_eq!(methods, ["PATCH", "POST", "POST"]);
    assert_eq!(calls[1].path, "/webhooks/2200/tok-long");
    let contents: Vec<&str> = (calls.iter())
        .map(|c| c.body["content"].as_str().unwrap())
        .collect();
    assert!(contents.iter().all(|c| c.chars().count() <= 2000));
    assert_eq!(
        contents.concat().replace(char::is_whitespace, ""),
        long.replace(char::is_whitespace, "")
    );

    closed(&env, "completed", 2).await;
    assert_eq!(
        calls_on(&api, "tok-short", 1).await.len(),
        1,
        "the redelivered command is answered once"
    );
    assert_eq!(discord_calls(&api).await.len(), 4);
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_is_waited_out_and_an_expired_token_parks_the_reply_with_its_reason() {
    let Some(python) = pynacl() else { return };
    let model = hermes_testkit::openai_fake("Noted.").await;
    let api = discord_fake().await;
    // Discord is busy once on this interaction's webhook: 429 with `retry_after`.
    discord_route("original")
        .and(path_regex("/tok-busy/"))
        .respond_with(discord_rate_limited(1.0))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&api)
        .await;
    // This interaction's token has expired: Unknown Webhook.
    discord_route("original")
        .and(path_regex("/tok-gone/"))
        .respond_with(discord_unknown_webhook())
        .with_priority(1)
        .mount(&api)
        .await;
    let env = discord_env(&python, &model, &api).await;
    let fleet = env.start(&Service::ALL).await;
    let bus = env.bus().await;

    let started = Instant::now();
    command(&fleet, &python, ask_on("tok-busy", "7900", "note this")).await;
    let calls = calls_on(&api, "tok-busy", 2).await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retry_after waited"
    );
    assert_eq!(calls[1].body["content"], "Noted.");
    closed(&env, "completed", 1).await;
    assert_eq!(
        calls_on(&api, "tok-busy", 2).await.len(),
        2,
        "sent once after the 429"
    );

    command(&fleet, &python, ask_on("tok-gone", "7901", "still there?")).await;
    let parked = parked_one(&bus, Stage::Delivery, Duration::from_secs(30)).await;
    assert_eq!(parked.reason.as_deref(), Some("invalid_recipient"));
    let detail = parked.detail.unwrap_or_default();
    assert!(
        detail.contains("token has expired") && detail.contains("10015"),
        "{detail}"
    );
    assert!(
        !detail.contains("tok-gone"),
        "the token is never in the detail: {detail}"
    );
    closed(&env, "failed", 1).await;
    assert_eq!(
        calls_on(&api, "tok-gone", 1).await.len(),
        1,
        "an expired token is not retried"
    );
    fleet.stop().await.unwrap();
}
