//! The operator MCP server over HTTP (`POST /mcp`, docs/operator-mcp.md): conversations made
//! by Telegram messages through the fleet are listed, searched, paged and read; channels
//! and chats are shown; a message's (absent) media is explained; tool calls waiting for an
//! operator are listed and answered, two answers at once deciding once. And what it
//! refuses: no key, a key without the operator scope, GET, unknown tools, bad arguments.
//! The official SDK over stdio and HTTP is in `operator_mcp_sdk`; both share the helpers
//! here.

use std::sync::Arc;
use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys::{self, KeyScope};
use hermes_testkit::{Fleet, KEY, TestEnv, count, eventually};
use hermes_types::ids::{ApiKeyId, ApprovalId, RunId};
use hermes_types::model::{LlmRequest, Platform, ReplyTo, Tier, ToolCall, ToolRequest};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::Barrier;

use crate::agent_mcp::{Mcp, TG_SECRET, env_with, peer};
use hermes_testkit::telegram_text;

/// A new key with `scopes`: (its id, the key).
pub(crate) async fn key_with(env: &TestEnv, scopes: &[KeyScope]) -> (ApiKeyId, String) {
    let c = env.db().get().await.unwrap();
    let created = api_keys::create(&c, "operator-test", None, None)
        .await
        .unwrap();
    assert!(
        api_keys::set_scopes(&c, created.key.id, scopes)
            .await
            .unwrap()
    );
    (created.key.id, created.secret_key)
}

/// Users on Telegram chats `chats` (named `names`), each with one message sent through the
/// fleet and answered by the mock model: waits until every conversation holds both.
pub(crate) async fn conversations(env: &TestEnv, fleet: &Fleet, chats: &[(i64, &str)]) {
    let c = env.db().get().await.unwrap();
    let db = env.db();
    for (i, (chat, name)) in chats.iter().enumerate() {
        let user = env.user(Platform::Telegram, &chat.to_string(), 5).await;
        c.execute(
            "UPDATE users SET display_name = $2 WHERE id = $1",
            &[&user.id, name],
        )
        .await
        .unwrap();
        fleet
            .telegram_update(
                TG_SECRET,
                &telegram_text(*chat, i as i64 + 1, &format!("hello from {name}")),
            )
            .await;
        // Each answered before the next is sent, so the chats' activity is in their order.
        eventually(Duration::from_secs(30), "the message answered", || async {
            let n = count(
                &db,
                "SELECT count(*) FROM interactions WHERE direction = 'outbound'",
                &[],
            )
            .await;
            (n == i as i64 + 1).then_some(())
        })
        .await;
    }
}

/// A run of chat `chat` waiting for an operator on `calls` tool calls of one round (the
/// round resumes only when all are answered; tests leave one waiting so nothing runs):
/// the approval ids, in call order.
pub(crate) async fn waiting_calls(env: &TestEnv, chat: &str, calls: usize) -> Vec<ApprovalId> {
    let db = env.db();
    let mut c = db.get().await.unwrap();
    let run = RunId::new();
    c.execute(
        "INSERT INTO agent_runs (id, platform, sender_id, chat_id, status, tier)
         VALUES ($1, 'telegram', $2, $2, 'awaiting_tools', 'free')",
        &[&run, &chat],
    )
    .await
    .unwrap();
    let to = ReplyTo {
        platform: Platform::Telegram,
        chat_id: chat.into(),
        callback_url: None,
        quote: None,
        interaction: None,
    };
    let calls: Vec<ToolCall> = (0..calls)
        .map(|i| ToolCall {
            id: format!("call-{i}"),
            name: "shell".into(),
            arguments: json!({ "command": format!("rm -rf /tmp/{i}") }),
            signature: None,
        })
        .collect();
    let request = ToolRequest {
        request: LlmRequest::new(to, Tier::Free, Vec::new(), Vec::new()),
        calls: calls.clone(),
        decisions: Vec::new(),
        results: Vec::new(),
    };
    let tx = c.transaction().await.unwrap();
    let refs: Vec<&ToolCall> = calls.iter().collect();
    let waiting =
        hermes_db::approvals::request(&tx, run, &request, &refs, Duration::from_secs(3600))
            .await
            .unwrap();
    tx.commit().await.unwrap();
    waiting.iter().map(|a| a.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_read_conversations_messages_and_channels() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let (_, op_key) = key_with(&env, &[KeyScope::Operator]).await;
    let fleet = env.start(&Service::ALL).await;
    conversations(&env, &fleet, &[(4242, "Ada Lovelace"), (5151, "Grace 50%")]).await;
    let mcp = Mcp::operator(&fleet, &op_key);

    let init = mcp
        .rpc("initialize", json!({ "protocolVersion": "2025-06-18" }))
        .await;
    assert_eq!(init["result"]["serverInfo"]["name"], "hermes-operator");
    let listed = mcp.rpc("tools/list", json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for tool in [
        "conversations_list",
        "conversation_get",
        "messages_read",
        "attachments_fetch",
        "channels_list",
        "permissions_list_open",
        "permissions_respond",
    ] {
        assert!(names.contains(&tool), "{tool} in {names:?}");
    }

    // Newest activity first, both on Telegram; paged one by one with the cursor.
    let all = mcp.ok("conversations_list", json!({})).await;
    let list = all["conversations"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{all}");
    assert_eq!(list[0]["user"]["display_name"], "Grace 50%");
    assert_eq!(list[0]["target"], "telegram:5151");
    assert_eq!(list[0]["messages"], 2);
    assert_eq!(all["next_cursor"], Value::Null);
    let first = mcp.ok("conversations_list", json!({ "limit": 1 })).await;
    assert_eq!(first["conversations"][0], list[0]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = mcp
        .ok(
            "conversations_list",
            json!({ "limit": 1, "cursor": cursor }),
        )
        .await;
    assert_eq!(second["conversations"], json!([list[1].clone()]));
    assert_eq!(second["next_cursor"], Value::Null);
    // Filters: platform, and a search by name or sender id whose wildcards are literal.
    let whatsapp = mcp
        .ok("conversations_list", json!({ "platform": "whatsapp" }))
        .await;
    assert_eq!(whatsapp["conversations"], json!([]));
    for (search, want) in [
        ("lovelace", "Ada Lovelace"),
        ("424", "Ada Lovelace"),
        ("50%", "Grace 50%"),
    ] {
        let found = mcp
            .ok(
                "conversations_list",
                json!({ "search": search, "platform": "telegram" }),
            )
            .await;
        let found = found["conversations"].as_array().unwrap();
        assert_eq!(found.len(), 1, "{search}");
        assert_eq!(found[0]["user"]["display_name"], want, "{search}");
    }
    let none = mcp
        .ok("conversations_list", json!({ "search": "_%" }))
        .await;
    assert_eq!(none["conversations"], json!([]));

    // One conversation in detail.
    let ada = list[1]["conversation_id"].as_str().unwrap();
    let detail = mcp
        .ok("conversation_get", json!({ "conversation_id": ada }))
        .await;
    assert_eq!(detail["platform"], "telegram");
    assert_eq!(detail["chat_id"], "4242");
    assert_eq!(
        detail["user"]["senders"],
        json!([{ "sender_id": "4242", "activated": true }])
    );
    assert_eq!(detail["message_stats"]["inbound"], 1);
    assert_eq!(detail["message_stats"]["outbound"], 1);
    assert_eq!(detail["open_runs"], json!([]));

    // Its history, oldest first, paged both ways.
    let read = mcp
        .ok("messages_read", json!({ "conversation_id": ada }))
        .await;
    let msgs = read["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["direction"], "inbound");
    assert_eq!(msgs[0]["text"], "hello from Ada Lovelace");
    assert_eq!(msgs[1]["direction"], "outbound");
    assert_eq!(msgs[0]["run_id"], msgs[1]["run_id"]);
    assert_eq!(read["has_more"], false);
    let newest = mcp
        .ok(
            "messages_read",
            json!({ "conversation_id": ada, "limit": 1 }),
        )
        .await;
    assert_eq!(newest["messages"], json!([msgs[1].clone()]));
    assert_eq!(newest["has_more"], true);
    let older = mcp
        .ok(
            "messages_read",
            json!({ "conversation_id": ada, "before": msgs[1]["message_id"] }),
        )
        .await;
    assert_eq!(older["messages"], json!([msgs[0].clone()]));
    let newer = mcp
        .ok(
            "messages_read",
            json!({ "conversation_id": ada, "after": msgs[0]["message_id"], "limit": 1 }),
        )
        .await;
    assert_eq!(newer["messages"], json!([msgs[1].clone()]));
    assert_eq!(newer["has_more"], false);

    // A text message carries no media: an empty list that says why.
    let media = mcp
        .ok(
            "attachments_fetch",
            json!({ "message_id": msgs[0]["message_id"] }),
        )
        .await;
    assert_eq!(media["attachments"], json!([]));
    assert!(
        media["note"]
            .as_str()
            .unwrap()
            .contains("No media is recorded")
    );

    // Platforms and known chats.
    let channels = mcp.ok("channels_list", json!({})).await;
    let platforms = channels["platforms"].as_array().unwrap();
    assert_eq!(
        platforms[0],
        json!({ "platform": "telegram", "can_send": true, "via": "bot api" })
    );
    assert_eq!(platforms[1]["can_send"], false, "no WhatsApp credentials");
    let chats: Vec<&str> = channels["chats"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["sender_id"].as_str())
        .collect();
    assert_eq!(chats, ["5151", "4242"]);
    let ig = mcp
        .ok("channels_list", json!({ "platform": "instagram" }))
        .await;
    assert_eq!(ig["chats"], json!([]));
    assert_eq!(ig["platforms"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_listed_and_decided_once_by_concurrent_operators() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let (key_id, op_key) = key_with(&env, &[KeyScope::Operator]).await;
    let fleet = env.start(&[Service::Ingest]).await;
    let ids = waiting_calls(&env, "4242", 3).await;
    let mcp = Arc::new(Mcp::operator(&fleet, &op_key));

    let open = mcp.ok("permissions_list_open", json!({})).await;
    let open = open["approvals"].as_array().unwrap();
    assert_eq!(open.len(), 3);
    assert_eq!(open[0]["approval_id"], json!(ids[0]));
    assert_eq!(open[0]["tool"], "shell");
    assert_eq!(open[0]["arguments"], json!({ "command": "rm -rf /tmp/0" }));
    assert_eq!(open[0]["status"], "pending");
    assert_eq!(open[0]["platform"], "telegram");

    // Two operators allow the same call at once: one decides, the other is told.
    let barrier = Arc::new(Barrier::new(2));
    let answers = [KEY.to_string(), op_key.clone()].map(|k| {
        let barrier = barrier.clone();
        let fleet_url = mcp.clone();
        let id = ids[0];
        tokio::spawn(async move {
            let mcp = fleet_url.with_key(&k);
            barrier.wait().await;
            mcp.ok(
                "permissions_respond",
                json!({ "approval_id": id, "decision": "allow", "reason": "looks fine" }),
            )
            .await
        })
    });
    let mut outcomes = Vec::new();
    for a in answers {
        outcomes.push(a.await.unwrap());
    }
    outcomes.sort_by_key(|o| o["outcome"].as_str().unwrap().to_string());
    assert_eq!(outcomes[0]["outcome"], "already_decided", "{outcomes:?}");
    assert_eq!(outcomes[1]["outcome"], "decided", "{outcomes:?}");
    assert_eq!(outcomes[0]["verdict"], "allowed");
    assert_eq!(outcomes[1]["resumed"], false, "two calls still wait");
    let by = outcomes[1]["approval"]["decided_by"]
        .as_str()
        .unwrap()
        .to_string();
    // The key is recorded by its id, never by its shown prefix (which many keys share).
    assert!(by == "operator" || by == format!("key:{key_id}"), "{by}");
    let resolved = count(
        &env.db(),
        "SELECT count(*) FROM events WHERE kind = 'approval_resolved'",
        &[],
    )
    .await;
    assert_eq!(resolved, 1, "one answer, one event");

    // A denial, with who and why recorded; then the list holds the one left.
    let denied = mcp
        .ok(
            "permissions_respond",
            json!({ "approval_id": ids[1], "decision": "deny", "reason": "no" }),
        )
        .await;
    assert_eq!(denied["verdict"], "denied");
    assert_eq!(denied["approval"]["decided_by"], format!("key:{key_id}"));
    assert_eq!(denied["approval"]["reason"], "no");
    let open = mcp.ok("permissions_list_open", json!({})).await;
    assert_eq!(open["approvals"].as_array().unwrap().len(), 1);
    assert_eq!(open["approvals"][0]["approval_id"], json!(ids[2]));

    // Refusals of the tool: an unknown id, a bad decision, a bad id.
    let e = mcp
        .refused(
            "permissions_respond",
            json!({ "approval_id": ApprovalId::new(), "decision": "allow" }),
        )
        .await;
    assert_eq!(e["code"], "NOT_FOUND");
    let e = mcp
        .refused(
            "permissions_respond",
            json!({ "approval_id": ids[2], "decision": "maybe" }),
        )
        .await;
    assert_eq!(e["code"], "INVALID_ARGUMENT");
    let e = mcp
        .refused(
            "permissions_respond",
            json!({ "approval_id": "nope", "decision": "allow" }),
        )
        .await;
    assert_eq!(e["argument"], "approval_id");
    let metrics = fleet.metrics().await;
    let calls = hermes_testkit::metric(
        &metrics,
        "hermes_operator_mcp_calls_total{outcome=\"ok\",tool=\"permissions_respond\",transport=\"http\"}",
    );
    assert_eq!(calls, Some(3.0), "two allowed at once and one denial");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_without_the_operator_scope_and_bad_input_are_refused() {
    let mut env = TestEnv::new().await;
    env.set("HERMES_MAX_BODY_BYTES", "65536");
    let (_, messages_key) = key_with(&env, &[KeyScope::Messages]).await;
    let (_, op_key) = key_with(&env, &[KeyScope::Operator, KeyScope::Messages]).await;
    let fleet = env.start(&[Service::Ingest]).await;
    let http = reqwest::Client::new();
    let ping = json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" });

    let none = http
        .post(fleet.url("/mcp"))
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(none.headers()["www-authenticate"], "Bearer");
    let (status, body) = Mcp::operator(&fleet, &messages_key)
        .post_raw(ping.to_string())
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"]["code"], -32003);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--scope operator")
    );
    let get = http
        .get(fleet.url("/mcp"))
        .bearer_auth(&op_key)
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(get.headers()["allow"], "POST");

    // A key made with the CLI's `--scope operator` reaches the server within its rate.
    let args = "api-keys create --json --name ops --scope operator --requests-per-minute 2";
    let args: Vec<&str> = args.split(' ').collect();
    let (code, out, err) = env.hermes_with_stdin(&args, "").await;
    assert_eq!(code, 0, "{err}");
    let created: Value = serde_json::from_str(&out).unwrap();
    let slow = Mcp::operator(&fleet, created["key"].as_str().unwrap());
    for _ in 0..2 {
        assert_eq!(slow.rpc("ping", json!({})).await["result"], json!({}));
    }
    let (status, body) = slow.post_raw(ping.to_string()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["error"]["code"], -32002);

    let mcp = Mcp::operator(&fleet, &op_key);
    assert_eq!(mcp.rpc("ping", json!({})).await["result"], json!({}));
    let (status, body) = mcp.post_raw(format!("[{ping}]")).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!(-32600))
    );
    let (status, body) = mcp.post_raw("{not json").await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::BAD_REQUEST, json!(-32700))
    );
    let (status, _) = mcp
        .post_raw(format!("{{\"pad\": \"{}\"}}", "x".repeat(70_000)))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let unknown = mcp
        .rpc("tools/call", json!({ "name": "rm_rf", "arguments": {} }))
        .await;
    assert_eq!(unknown["error"]["code"], -32602);

    for (tool, args, argument) in [
        ("conversations_list", json!({ "limit": 201 }), "limit"),
        ("conversations_list", json!({ "limit": 0 }), "limit"),
        (
            "conversations_list",
            json!({ "search": "x".repeat(201) }),
            "search",
        ),
        (
            "conversations_list",
            json!({ "platform": "fax" }),
            "platform",
        ),
        (
            "conversations_list",
            json!({ "cursor": "not-a-cursor" }),
            "cursor",
        ),
        ("conversations_list", json!({ "colour": "red" }), "colour"),
        ("conversation_get", json!({}), "conversation_id"),
        (
            "conversation_get",
            json!({ "conversation_id": 7 }),
            "conversation_id",
        ),
        (
            "messages_read",
            json!({ "conversation_id": RunId::new(), "before": 1, "after": 2 }),
            "after",
        ),
        (
            "messages_read",
            json!({ "conversation_id": RunId::new(), "before": -1 }),
            "before",
        ),
        (
            "attachments_fetch",
            json!({ "message_id": "1" }),
            "message_id",
        ),
        ("channels_list", json!({ "limit": 1000 }), "limit"),
        ("permissions_list_open", json!({ "limit": "ten" }), "limit"),
        (
            "permissions_respond",
            json!({ "approval_id": ApprovalId::new(), "decision": "allow", "reason": "r".repeat(2001) }),
            "reason",
        ),
    ] {
        let e = mcp.refused(tool, args.clone()).await;
        assert_eq!(e["code"], "INVALID_ARGUMENT", "{tool} {args}");
        assert_eq!(e["argument"], argument, "{tool} {args}: {e}");
    }
    for (tool, args) in [
        (
            "conversation_get",
            json!({ "conversation_id": RunId::new() }),
        ),
        ("messages_read", json!({ "conversation_id": RunId::new() })),
        ("attachments_fetch", json!({ "message_id": 999_999 })),
    ] {
        assert_eq!(mcp.refused(tool, args).await["code"], "NOT_FOUND", "{tool}");
    }
}
