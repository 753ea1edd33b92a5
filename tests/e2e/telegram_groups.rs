//! Telegram as people use it in groups, through the whole fleet (docs/channels.md, "Group
//! chats", "Edited messages" and "Long replies"): a group message not for the bot is
//! acknowledged and makes no run, a mention is answered once quoting it, an edit is ignored
//! or answered once as a correction, and a long reply's code block arrives with its fences
//! re-opened. Telegram's Bot API is a wiremock server; the model is the built-in echo.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{TestEnv, count, eventually, queued_llm_requests, telegram_sent};

use crate::conversations::{completed, telegram_api};
use hermes_types::model::Platform;
use serde_json::{Value, json};
use wiremock::MockServer;

const SECRET: &str = "tg-secret-0123456789";
const TOKEN: &str = "7000000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
/// The member who writes in the published fixtures.
const MEMBER: &str = "222333444";

macro_rules! fixture {
    ($name:literal) => {
        serde_json::from_str::<Value>(include_str!(concat!(
            "../../shared/channels/tests/fixtures/telegram/",
            $name,
            ".json"
        )))
        .expect("a fixture is JSON")
    };
}

/// This test's environment: the Bot API at `api`, `[channels.telegram]` as `toml`, and the
/// member as a user with 10 credits.
async fn env_with(api: &MockServer, toml: &str) -> TestEnv {
    let mut env = TestEnv::new().await;
    let file = std::env::temp_dir().join(format!("{}-telegram.toml", env.ns));
    std::fs::write(&file, format!("[channels.telegram]\n{toml}")).unwrap();
    env.set("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .set("TELEGRAM_BOT_TOKEN", TOKEN)
        .set("TELEGRAM_API_BASE_URL", &api.uri())
        .set("HERMES_CONFIG", file.to_str().unwrap());
    env.user(Platform::Telegram, MEMBER, 10).await;
    env
}

/// The member's message `message_id` in their private chat with the bot.
fn private(update_id: i64, message_id: i64, text: &str) -> Value {
    let member: i64 = MEMBER.parse().unwrap();
    json!({"update_id": update_id, "message": {"message_id": message_id,
        "from": {"id": member, "is_bot": false, "first_name": "Jane"},
        "chat": {"id": member, "type": "private"},
        "date": 1700000300 + message_id, "text": text}})
}

/// Wait until the Bot API has received `n` messages; return them.
async fn sent_n(api: &MockServer, n: usize) -> Vec<Value> {
    eventually(Duration::from_secs(30), "messages sent", || async {
        let got = telegram_sent(api).await;
        (got.len() >= n).then_some(got)
    })
    .await
}

/// The metric line of one Telegram message counted under `outcome`.
fn once(outcome: &str) -> String {
    format!("hermes_ingest_messages_total{{outcome=\"{outcome}\",platform=\"telegram\"}} 1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_message_without_a_mention_gets_nothing_and_a_mention_one_quoted_answer() {
    let api = telegram_api().await;
    let env = env_with(&api, "bot_username = \"hermes_test_bot\"\n").await;
    let fleet = env.start(&Service::ALL).await;
    let db = env.db();

    let quiet = fleet
        .telegram_update(SECRET, &fixture!("group_no_mention"))
        .await;
    assert_eq!(quiet["routed"], 0, "{quiet}");
    // Edits are ignored unless configured: acknowledged, no run.
    let edit = fleet
        .telegram_update(SECRET, &fixture!("group_edited_mention"))
        .await;
    assert_eq!(edit["routed"], 0, "{edit}");
    let asked = fleet
        .telegram_update(SECRET, &fixture!("group_mention"))
        .await;
    assert_eq!(asked["routed"], 1, "{asked}");

    completed(&db, 1).await;
    let bodies = sent_n(&api, 1).await;
    assert_eq!(bodies.len(), 1, "one answer: {bodies:?}");
    assert_eq!(bodies[0]["chat_id"], "-1001234567890");
    assert_eq!(
        bodies[0]["reply_parameters"]["message_id"], 501,
        "the answer quotes the question"
    );
    // The model saw the text without the bot's mention.
    assert_eq!(
        bodies[0]["text"],
        "echo: 🌦 hey, what's the weather in Zürich tomorrow?"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM agent_runs", &[]).await, 1);
    // One credit spent, for the one answer.
    assert_eq!(count(&db, "SELECT credits FROM users", &[]).await, 9);

    let m = fleet.metrics().await;
    for line in [
        once("not_addressed"),
        once("edit_ignored"),
        once("accepted"),
    ] {
        assert!(m.contains(&line), "missing {line}");
    }
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_is_answered_once_as_a_correction_when_configured() {
    let api = telegram_api().await;
    let env = env_with(
        &api,
        "bot_username = \"hermes_test_bot\"\nedits = \"answer\"\n",
    )
    .await;
    let fleet = env.start(&Service::ALL).await;
    let db = env.db();

    fleet
        .telegram_update(SECRET, &fixture!("group_mention"))
        .await;
    completed(&db, 1).await;
    // Telegram delivers the edit twice: one run, one answer.
    assert_eq!(
        fleet
            .telegram_update(SECRET, &fixture!("group_edited_mention"))
            .await["routed"],
        1
    );
    assert_eq!(
        fleet
            .telegram_update(SECRET, &fixture!("group_edited_mention"))
            .await["routed"],
        0
    );
    completed(&db, 2).await;
    let bodies = sent_n(&api, 2).await;
    assert_eq!(
        bodies[1]["text"],
        "echo: (edited) what's the weather in Zurich on Sunday?"
    );
    assert_eq!(bodies[1]["reply_parameters"]["message_id"], 501);
    assert_eq!(count(&db, "SELECT count(*) FROM agent_runs", &[]).await, 2);
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_with_a_code_block_is_split_with_its_fence_reopened() {
    let api = telegram_api().await;
    let env = env_with(&api, "").await;
    let fleet = env.start(&Service::ALL).await;
    let lines: Vec<String> = (0..150)
        .map(|i| format!("    total_{i} = sum(values[{i}:]) / len(values)"))
        .collect();
    let text = format!(
        "Please review [the style guide](https://example.com/style_(v2)) first.\n\n```python\n{}\n```\n\nThanks!",
        lines.join("\n")
    );
    fleet
        .telegram_update(SECRET, &private(30001, 12, &text))
        .await;
    completed(&env.db(), 1).await;

    let bodies = telegram_sent(&api).await;
    let parts: Vec<&str> = bodies.iter().map(|b| b["text"].as_str().unwrap()).collect();
    assert!(parts.len() >= 2, "{parts:?}");
    assert!(parts.iter().all(|p| p.chars().count() <= 4096));
    assert!(parts[0].contains("[the style guide](https://example.com/style_(v2))"));
    assert!(
        parts[0].ends_with("\n```"),
        "the first part closes the fence"
    );
    assert!(
        parts[1].starts_with("```python\n"),
        "the next re-opens it in its language"
    );
    for line in &lines {
        assert!(parts.iter().any(|p| p.lines().any(|l| l == line)), "{line}");
    }
    // A private chat's answer quotes nothing.
    assert!(bodies.iter().all(|b| b.get("reply_parameters").is_none()));
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_chat_never_reaches_the_model_context_of_a_group_answer() {
    let api = telegram_api().await;
    let env = env_with(&api, "bot_username = \"hermes_test_bot\"\n").await;
    let fleet = env.start(&Service::ALL).await;
    let db = env.db();
    fleet
        .telegram_update(
            SECRET,
            &private(30002, 40, "my passport number is X1234567"),
        )
        .await;
    completed(&db, 1).await;
    fleet
        .telegram_update(SECRET, &fixture!("group_mention"))
        .await;
    completed(&db, 2).await;

    let system = |request: &Value| -> String {
        request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "system")
            .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let requests = queued_llm_requests(&db).await;
    let group = system(&requests[1]);
    assert!(!group.contains("X1234567"), "{group}");
    assert!(group.contains("every member reads your answer"), "{group}");
    // The same user's next private message still sees their earlier sessions.
    fleet
        .telegram_update(SECRET, &private(30003, 41, "thanks"))
        .await;
    completed(&db, 3).await;
    let requests = queued_llm_requests(&db).await;
    assert!(!system(&requests[2]).contains("every member reads"));
    fleet.stop().await.unwrap();
}
