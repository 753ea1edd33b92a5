//! What an external agent and an operator's assignment may reach (docs/security.md, "Keys and
//! tenants"; docs/agents.md, "The agent's side"): `context.bundle` only while its run waits
//! for its reply, and none of the user's memory in a group run; `memory.remember` only on an
//! open run, stored as the agent's, capped per user and expired under retention; an
//! explicit assignment only to an agent of the user's own workspace.

use std::time::Duration;

use hermes::Service;
use hermes_config::Retention;
use hermes_db::memory::{self, Source};
use hermes_testkit::{TestEnv, count, metric};
use hermes_types::agent::{AgentKind, EngagementMode};
use hermes_types::model::Platform;
use serde_json::{Value, json};

use crate::agent_mcp::{Mcp, TG_SECRET, assign, env_with, external_agent, key, peer};
use crate::forge_wakes::agent;
use hermes_testkit::telegram_text;

/// A Telegram group message of sender `from` in group `group`, addressed to the bot.
fn group_mention(group: i64, from: i64, text: &str) -> Value {
    let text = format!("@hermes_test_bot {text}");
    json!({
        "update_id": 9001,
        "message": {
            "message_id": 9001,
            "from": {"id": from, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": group, "title": "Friends", "type": "supergroup"},
            "date": 1_760_000_100,
            "text": text,
            "entities": [{"offset": 0, "length": 16, "type": "mention"}]
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundle_ends_with_its_run_and_shows_no_memory_in_a_group() {
    let peer = peer().await;
    let mut env = env_with(&peer).await;
    let file = std::env::temp_dir().join(format!("{}-telegram.toml", env.ns));
    std::fs::write(
        &file,
        "[channels.telegram]\nbot_username = \"hermes_test_bot\"\n",
    )
    .unwrap();
    env.set("HERMES_CONFIG", file.to_str().unwrap());
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Telegram, "4242", 5).await;
    assign(&env, user.id, victor).await;
    // What the user told the bot in private.
    {
        let c = env.db().get().await.unwrap();
        memory::set(&c, user.id, "diet", "vegan", Source::Operator)
            .await
            .unwrap();
        memory::set(&c, user.id, "health", "asthma", Source::Extracted)
            .await
            .unwrap();
    }
    let (_, agent_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&Service::ALL).await;
    let mcp = Mcp::new(&fleet, &agent_key);

    // The private chat: the bundle holds the user's memory while the run waits.
    fleet
        .telegram_update(
            TG_SECRET,
            &telegram_text(4242, 7, "what should I eat tonight?"),
        )
        .await;
    let run_id = mcp.next_run().await["runId"].as_str().unwrap().to_string();
    mcp.ok("inbox.ack", json!({"runId": run_id})).await;
    let bundle = mcp.ok("context.bundle", json!({"runId": run_id})).await;
    assert_eq!(bundle["chat"]["kind"], "direct");
    assert_eq!(bundle["user"]["memory"]["diet"], "vegan");
    assert_eq!(bundle["user"]["facts"][0]["value"], "asthma");
    assert_eq!(bundle["user"]["memoryWithheld"], false);
    mcp.ok(
        "chat.appendMessage",
        json!({"runId": run_id, "body": "A vegan curry."}),
    )
    .await;
    // Answered: the run is done, and so is what it may read or write.
    let ended = mcp
        .refused("context.bundle", json!({"runId": run_id}))
        .await;
    assert_eq!(ended["code"], "RUN_ENDED", "{ended}");
    let (status, body) = mcp.rest("context.bundle", json!({"runId": run_id})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "RUN_ENDED");
    let late = mcp
        .refused(
            "memory.remember",
            json!({"runId": run_id, "key": "mood", "value": "hungry"}),
        )
        .await;
    assert_eq!(late["code"], "RUN_ENDED", "{late}");

    // A group: every member reads the answer, so the user's memory stays out.
    fleet
        .telegram_update(
            TG_SECRET,
            &group_mention(-100_777, 4242, "what should we eat?"),
        )
        .await;
    let group_run = mcp.next_run().await;
    assert_eq!(group_run["chatId"], "-100777");
    let group_id = group_run["runId"].as_str().unwrap().to_string();
    let bundle = mcp.ok("context.bundle", json!({"runId": group_id})).await;
    assert_eq!(bundle["chat"]["kind"], "group", "{bundle}");
    assert!(
        bundle["chat"]["note"]
            .as_str()
            .unwrap()
            .contains("every member")
    );
    assert_eq!(bundle["user"]["memory"], json!({}));
    assert_eq!(bundle["user"]["facts"], json!([]));
    assert_eq!(bundle["user"]["memoryWithheld"], true);
    let text = bundle.to_string();
    assert!(
        !text.contains("vegan") && !text.contains("asthma"),
        "{text}"
    );
    assert!(text.contains("what should we eat?"), "the message is there");

    let metrics = fleet.metrics().await;
    assert_eq!(
        metric(
            &metrics,
            "hermes_mcp_calls_total{outcome=\"RUN_ENDED\",tool=\"agent.context.bundle\"}"
        ),
        Some(2.0)
    );
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(file);
}

/// Retention that keeps everything but facts, which last `facts_days`.
fn facts_only(facts_days: u32) -> Retention {
    Retention {
        runs_days: 0,
        conversations_days: 0,
        statuses_days: 0,
        facts_days,
        ledger_days: 0,
        responses_days: 0,
        forge_deliveries_days: 0,
        sweep_every: Duration::from_secs(3600),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remembered_facts_are_the_agents_capped_per_user_and_expire() {
    let peer = peer().await;
    let mut env = env_with(&peer).await;
    env.set("HERMES_AGENT_FACTS_PER_USER", "2");
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Telegram, "4242", 5).await;
    assign(&env, user.id, victor).await;
    let db = env.db();
    memory::set(
        &db.get().await.unwrap(),
        user.id,
        "allergy",
        "peanuts",
        Source::Operator,
    )
    .await
    .unwrap();
    let (_, agent_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&Service::ALL).await;
    let mcp = Mcp::new(&fleet, &agent_key);
    fleet
        .telegram_update(
            TG_SECRET,
            &telegram_text(4242, 7, "I have a cat and a red car"),
        )
        .await;
    let run_id = mcp.next_run().await["runId"].as_str().unwrap().to_string();
    let remember = |k: &str, v: &str| json!({"runId": run_id, "key": k, "value": v});

    let first = mcp.ok("memory.remember", remember("pet", "a cat")).await;
    assert_eq!(first["refreshed"], false);
    // The same fact again is refreshed, not repeated.
    let again = mcp.ok("memory.remember", remember("pet", "a cat")).await;
    assert_eq!(again["refreshed"], true);
    mcp.ok("memory.remember", remember("car", "red")).await;
    let full = mcp
        .refused("memory.remember", remember("book", "Dune"))
        .await;
    assert_eq!(full["code"], "LIMIT_EXCEEDED", "{full}");
    assert_eq!(
        (
            full["limit"].clone(),
            full["max"].clone(),
            full["held"].clone()
        ),
        (json!("HERMES_AGENT_FACTS_PER_USER"), json!(2), json!(2))
    );
    let (status, body) = mcp.rest("memory.remember", remember("film", "Alien")).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "LIMIT_EXCEEDED");
    // A structural value replaces the one there is: no fact is added.
    mcp.ok("memory.remember", remember("diet", "vegan")).await;
    let uid = user.id;
    let by_agent = |structural: bool| {
        let db = db.clone();
        async move {
            count(
                &db,
                "SELECT count(*) FROM user_memory WHERE user_id = $1 AND source = 'agent' AND structural = $2",
                &[&uid, &structural],
            )
            .await
        }
    };
    assert_eq!((by_agent(false).await, by_agent(true).await), (2, 1));
    assert_eq!(
        metric(
            &fleet.metrics().await,
            "hermes_tenant_limit_refusals_total{limit=\"agent_facts\"}"
        ),
        Some(2.0)
    );

    // A year on, the agent's facts have expired; the operator's and the structural value stay.
    db.get()
        .await
        .unwrap()
        .execute(
            "UPDATE user_memory SET created_at = now() - interval '400 days',
                updated_at = now() - interval '400 days' WHERE user_id = $1",
            &[&user.id],
        )
        .await
        .unwrap();
    let swept = hermes_db::retention::sweep(&db, &facts_only(365), 100)
        .await
        .unwrap();
    assert_eq!(
        swept.removed,
        vec![(hermes_db::retention::Table::UserMemory, 2)]
    );
    assert_eq!((by_agent(false).await, by_agent(true).await), (0, 1));
    let left = count(
        &db,
        "SELECT count(*) FROM user_memory WHERE user_id = $1 AND key = 'allergy'",
        &[&user.id],
    )
    .await;
    assert_eq!(left, 1, "what the operator set stays");
    // Room again: the agent may remember anew.
    mcp.ok("memory.remember", remember("book", "Dune")).await;
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assignment_names_an_agent_of_the_users_own_workspace() {
    let env = TestEnv::new().await;
    let db = env.db();
    let c = db.get().await.unwrap();
    c.execute(
        "INSERT INTO workspaces (slug, name) VALUES ('acme', 'Acme')",
        &[],
    )
    .await
    .unwrap();
    let rex = agent(&env, "acme", "rex", AgentKind::Internal).await;
    let ana = agent(&env, "default", "ana", AgentKind::Internal).await;
    let user = env.user(Platform::Telegram, "5150", 0).await;
    let id = user.id.to_string();

    // The CLI looks the agent up in the user's workspace, and refuses another one.
    let (code, _, err) = env
        .hermes(&["users", "set", &id, "--agent", "rex", "--workspace", "acme"])
        .await;
    assert_ne!(code, 0);
    assert!(err.contains("is not in workspace \"acme\""), "{err}");
    let (code, _, err) = env.hermes(&["users", "set", &id, "--agent", "rex"]).await;
    assert_ne!(code, 0);
    assert!(
        err.contains("no agent \"rex\" in the workspace of user"),
        "{err}"
    );
    let link = |agent: &'static str| {
        let id = id.clone();
        let env = &env;
        async move {
            env.hermes(&[
                "channels",
                "link",
                &id,
                "--platform",
                "telegram",
                "--sender-id",
                "6160",
                "--agent",
                agent,
            ])
            .await
        }
    };
    let (code, _, err) = link("rex").await;
    assert_ne!(code, 0);
    assert!(err.contains("no agent \"rex\""), "{err}");
    let assigned = |table: &'static str| {
        let db = db.clone();
        async move {
            let sql = format!("SELECT count(*) FROM {table} WHERE agent_id = $1");
            count(&db, &sql, &[&ana]).await
        }
    };
    assert_eq!(assigned("users").await, 0);

    // Its own workspace's agent is assigned.
    let (code, out, err) = env.hermes(&["users", "set", &id, "--agent", "ana"]).await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = link("ana").await;
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(assigned("users").await, 1);
    assert_eq!(assigned("user_channels").await, 1);

    // Written past the CLI, the database refuses it too.
    let err = c
        .execute(
            "UPDATE users SET agent_id = $1 WHERE id = $2",
            &[&rex, &user.id],
        )
        .await
        .unwrap_err();
    let db_err = err.as_db_error().expect("a database error");
    assert_eq!(db_err.constraint(), Some("users_agent_in_workspace"));
    let scope = hermes_db::users::ChannelScope::from(Platform::Telegram);
    let err = hermes_db::users::link_channel(&c, user.id, scope, "7170", true, Some(rex))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("is not an agent of the workspace"),
        "{err}"
    );
    let err = c
        .execute(
            "UPDATE user_channels SET agent_id = $1 WHERE sender_id = '6160'",
            &[&rex],
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.as_db_error().and_then(|e| e.constraint()),
        Some("user_channels_agent_in_workspace")
    );
    assert_eq!(assigned("users").await, 1, "unchanged");
}
