//! What the agent MCP surface refuses (docs/agents.md, "The agent's side"): mutations of a
//! REVIEW run, another agent's run, keys that speak for no agent, and bad input of every
//! kind (malformed JSON-RPC, batches, unknown methods and tools, bad arguments, oversized
//! bodies, missing or wrong keys), each with a clear error and nothing queued.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{KEY, count, eventually};
use hermes_types::agent::EngagementMode;
use hermes_types::model::Platform;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::agent_mcp::{Mcp, TG_SECRET, assign, env_with, external_agent, key, peer, run_status};
use hermes_testkit::telegram_text;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_mutations_foreign_runs_and_unlinked_keys_are_refused() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Review).await;
    let mizu = external_agent(&env, &peer, "mizu", EngagementMode::Execute).await;
    let user = env.user(Platform::Telegram, "4242", 5).await;
    assign(&env, user.id, victor).await;
    let (_, victor_key) = key(&env, Some(victor)).await;
    let (_, mizu_key) = key(&env, Some(mizu)).await;
    let (_, unlinked_key) = key(&env, None).await;
    let fleet = env.start(&Service::ALL).await;
    let victor_mcp = Mcp::new(&fleet, &victor_key);

    fleet
        .telegram_update(TG_SECRET, &telegram_text(4242, 9, "please review my plan"))
        .await;
    let run_id = victor_mcp.next_run().await["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let bundle = victor_mcp
        .ok("context.bundle", json!({"runId": run_id}))
        .await;
    assert_eq!(bundle["runProtocol"]["mutationAllowed"], false);
    assert_eq!(bundle["runProtocol"]["toolAllowlist"], json!([]));

    // REVIEW: no memory write, no message elsewhere, on either transport.
    let refused = victor_mcp
        .refused(
            "memory.remember",
            json!({"runId": run_id, "key": "diet", "value": "vegan"}),
        )
        .await;
    assert_eq!(
        refused,
        json!({"code": "MUTATION_NOT_ALLOWED", "engagementMode": "REVIEW", "tool": "memory.remember",
               "message": refused["message"]})
    );
    let refused = victor_mcp
        .refused(
            "chat.sendMessage",
            json!({"runId": run_id, "platform": "telegram", "chatId": "4242", "body": "hi"}),
        )
        .await;
    assert_eq!(refused["code"], "MUTATION_NOT_ALLOWED");
    assert_eq!(refused["tool"], "chat.sendMessage");
    let (status, body) = victor_mcp
        .rest(
            "memory.remember",
            json!({"runId": run_id, "key": "diet", "value": "vegan"}),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"]["code"], "MUTATION_NOT_ALLOWED");
    assert_eq!(body["error"]["engagementMode"], "REVIEW");
    let memory = count(&env.db(), "SELECT count(*) FROM user_memory", &[]).await;
    assert_eq!(memory, 0, "nothing remembered");

    // Another agent's run does not exist for mizu.
    let mizu_mcp = Mcp::new(&fleet, &mizu_key);
    for tool in ["inbox.ack", "context.bundle", "chat.startDraft"] {
        let e = mizu_mcp.refused(tool, json!({"runId": run_id})).await;
        assert_eq!(e["code"], "NOT_FOUND", "{tool}");
    }
    let e = mizu_mcp
        .refused(
            "chat.appendMessage",
            json!({"runId": run_id, "body": "mine now"}),
        )
        .await;
    assert_eq!(e["code"], "NOT_FOUND");
    let (status, body) = mizu_mcp
        .rest("runs.fail", json!({"runId": run_id, "reason": "x"}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "NOT_FOUND");
    assert_eq!(
        mizu_mcp.ok("inbox.list", json!({"status": "all"})).await["runs"],
        json!([])
    );

    // A key of people or scripts (and the operator key) may speak the protocol, not act.
    for k in [unlinked_key.as_str(), KEY] {
        let mcp = Mcp::new(&fleet, k);
        let init = mcp
            .rpc("initialize", json!({"protocolVersion": "2025-03-26"}))
            .await;
        assert_eq!(init["result"]["protocolVersion"], "2025-03-26");
        assert_eq!(
            mcp.refused("agents.me", json!({})).await["code"],
            "UNAUTHORIZED"
        );
        let e = mcp.refused("inbox.ack", json!({"runId": run_id})).await;
        assert_eq!(e["code"], "UNAUTHORIZED");
        let (status, body) = mcp.rest("inbox.list", json!({})).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(body["error"]["code"], "UNAUTHORIZED");
    }

    // The run's own reply is allowed in REVIEW: here a draft, which a Telegram chat is shown
    // as it grows (a draft update queued for delivery per chunk, with the text so far).
    let draft = victor_mcp
        .ok("chat.startDraft", json!({"runId": run_id}))
        .await;
    let draft_id = draft["draftId"].as_str().unwrap().to_string();
    for delta in ["Looks", " good."] {
        victor_mcp
            .ok(
                "chat.appendDraftChunk",
                json!({"runId": run_id, "draftId": draft_id, "delta": delta}),
            )
            .await;
    }
    let c = env.db().get().await.unwrap();
    let updates: Vec<Value> = c
        .query(
            "SELECT convert_from(body, 'UTF8')::jsonb FROM outbox
             WHERE convert_from(body, 'UTF8')::jsonb ->> 'kind' = 'draft_update' ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, Value>(0)["payload"].clone())
        .collect();
    assert_eq!(updates.len(), 2, "{updates:?}");
    assert_eq!(
        (updates[0]["text"].clone(), updates[0]["chunks"].clone()),
        (json!("Looks"), json!(1))
    );
    assert_eq!(
        (updates[1]["text"].clone(), updates[1]["chunks"].clone()),
        (json!("Looks good."), json!(2))
    );
    assert_eq!(updates[1]["draft_id"], draft_id.as_str());
    assert_eq!(updates[1]["reply_to"]["chat_id"], "4242");
    let done = victor_mcp
        .ok(
            "chat.finalizeDraft",
            json!({"runId": run_id, "draftId": draft_id}),
        )
        .await;
    assert_eq!(done["draftId"], draft_id.as_str());
    eventually(Duration::from_secs(30), "the run completed", || async {
        (run_status(&env, &run_id).await == "completed").then_some(())
    })
    .await;
    // The chat saw at most one message for the draft, whose last text is the answer: the
    // answer replaced the draft (or, had the draft not been shown yet, was sent once).
    let received = peer.received_requests().await.unwrap_or_default();
    let shown: Vec<(bool, String)> = received
        .iter()
        .filter_map(|r| {
            let edit = r.url.path().ends_with("/editMessageText");
            let send = r.url.path().ends_with("/sendMessage");
            let body = serde_json::from_slice::<Value>(&r.body).ok()?;
            let text = body["text"].as_str()?.to_string();
            ((edit || send) && text.contains("Looks")).then_some((edit, text))
        })
        .collect();
    assert_eq!(
        shown.iter().filter(|(edit, _)| !edit).count(),
        1,
        "{shown:?}"
    );
    assert_eq!(
        shown.last().map(|(_, t)| t.as_str()),
        Some("Looks good."),
        "{shown:?}"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_clearly_and_queues_nothing() {
    let peer = peer().await;
    let mut env = env_with(&peer).await;
    env.set("HERMES_MAX_BODY_BYTES", "65536");
    let victor = external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let user = env.user(Platform::Telegram, "4242", 5).await;
    assign(&env, user.id, victor).await;
    let (_, victor_key) = key(&env, Some(victor)).await;
    let fleet = env.start(&[Service::Ingest, Service::Router]).await;
    let mcp = Mcp::new(&fleet, &victor_key);
    fleet
        .telegram_update(TG_SECRET, &telegram_text(4242, 10, "hello"))
        .await;
    let run_id = mcp.next_run().await["runId"].as_str().unwrap().to_string();
    let db = env.db();
    let outbox = || count(&db, "SELECT count(*) FROM outbox", &[]);
    let before = outbox().await;

    let expect_rpc = |(status, body): (StatusCode, Value), want: StatusCode, code: i64| {
        assert_eq!(status, want, "{body}");
        assert_eq!(body["jsonrpc"], "2.0", "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(!body["error"]["message"].as_str().unwrap().is_empty());
    };
    expect_rpc(
        mcp.post_raw("{not json").await,
        StatusCode::BAD_REQUEST,
        -32700,
    );
    expect_rpc(
        mcp.post_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
            .await,
        StatusCode::BAD_REQUEST,
        -32600,
    );
    let (_, batch) = mcp
        .post_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
        .await;
    assert!(
        batch["error"]["message"]
            .as_str()
            .unwrap()
            .contains("batches are not supported")
    );
    expect_rpc(
        mcp.post_raw(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#)
            .await,
        StatusCode::BAD_REQUEST,
        -32600,
    );
    expect_rpc(
        mcp.post_raw(r#"{"jsonrpc":"2.0","id":1,"method":"resources/list"}"#)
            .await,
        StatusCode::OK,
        -32601,
    );
    expect_rpc(
        mcp.post_raw(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"issues.assigned"}}"#,
        )
        .await,
        StatusCode::OK,
        -32602,
    );
    expect_rpc(
        mcp.post_raw(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"inbox.list","arguments":[1]}}"#,
        )
        .await,
        StatusCode::OK,
        -32602,
    );
    // A notification is taken without an answer.
    let (status, body) = mcp
        .post_raw(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    assert_eq!((status, body), (StatusCode::ACCEPTED, Value::Null));
    let ping = mcp.rpc("ping", json!({})).await;
    assert_eq!(ping["result"], json!({}));

    // Bad arguments are the tool's refusal.
    for (tool, args) in [
        ("inbox.ack", json!({"runId": "not-a-uuid"})),
        ("inbox.ack", json!({})),
        ("inbox.list", json!({"status": "open"})),
        ("inbox.list", json!({"limit": 0})),
        ("chat.appendMessage", json!({"runId": run_id, "body": ""})),
        (
            "chat.appendMessage",
            json!({"runId": run_id, "body": "a\u{0}b"}),
        ),
        (
            "chat.appendMessage",
            json!({"runId": run_id, "body": "hi", "threadId": "x"}),
        ),
        ("chat.appendMessage", json!({"runId": run_id, "body": 42})),
        ("agents.heartbeat", json!({"status": "AWAY"})),
        (
            "memory.remember",
            json!({"runId": run_id, "key": "Not A Key", "value": "x"}),
        ),
    ] {
        let e = mcp.refused(tool, args.clone()).await;
        assert_eq!(e["code"], "INVALID_ARGUMENT", "{tool} {args}: {e}");
    }
    let (status, body) = mcp
        .rest("chat.appendMessage", json!({"runId": run_id}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "INVALID_ARGUMENT");
    let (status, body) = mcp.rest("issues.assigned", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "UNKNOWN_TOOL");

    // Too large, then without a key, with a wrong key, and the verbs there are none of.
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "chat.appendMessage", "arguments": {"runId": run_id, "body": "x".repeat(70_000)}}});
    let (status, body) = mcp.post_raw(huge.to_string()).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body["error"]["code"], -32600, "{body}");
    let (status, body) = mcp
        .rest("chat.appendMessage", huge["params"]["arguments"].clone())
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body["error"]["code"], "body_too_large");
    let http = reqwest::Client::new();
    let url = fleet.url("/api/mcp/rpc");
    // The key is checked before the body is read: a large body without one is 401, not 413,
    // answered from the head alone (a client still writing the body when the answer comes
    // would see its connection closed instead).
    let head = format!(
        "POST /api/mcp/rpc HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        fleet.http,
        huge.to_string().len()
    );
    assert_eq!(status_of_head(fleet.http, &head).await, 401);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let resp = http.post(&url).json(&ping).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    let resp = http
        .post(&url)
        .bearer_auth("hk_wrong")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let resp = http
        .post(fleet.url("/api/mcp/agents.me"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    for verb in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let resp = http
            .request(verb.clone(), &url)
            .bearer_auth(&victor_key)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED, "{verb}");
        assert_eq!(resp.headers()["allow"], "POST");
    }

    assert_eq!(outbox().await, before, "nothing was queued");
    assert_eq!(run_status(&env, &run_id).await, "routed");
    let open = mcp.ok("inbox.list", json!({"status": "all"})).await;
    assert_eq!(
        open["runs"][0]["runId"],
        run_id.as_str(),
        "the run is still owed its reply"
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_made_with_the_cli_speaks_for_its_agent_within_its_rate() {
    let peer = peer().await;
    let env = env_with(&peer).await;
    external_agent(&env, &peer, "victor", EngagementMode::Execute).await;
    let (code, out, err) = env
        .hermes_with_stdin(
            &[
                "api-keys",
                "create",
                "--json",
                "--name",
                "victor:agent",
                "--agent",
                "victor",
                "--requests-per-minute",
                "2",
            ],
            "",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    let created: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(created["agent"]["profileKey"], "victor");
    let agent_key = created["key"].as_str().unwrap().to_string();
    let (code, _, err) = env
        .hermes_with_stdin(
            &["api-keys", "create", "--name", "x", "--agent", "nobody"],
            "",
        )
        .await;
    assert_ne!(code, 0);
    assert!(
        err.contains("no agent \"nobody\" in workspace \"default\""),
        "{err}"
    );
    let (_, listed, _) = env
        .hermes_with_stdin(&["api-keys", "list", "--json"], "")
        .await;
    let listed: Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(
        listed.as_array().unwrap().len(),
        1,
        "the refused key was not made"
    );
    assert_eq!(listed[0]["agent"]["profileKey"], "victor");
    let (_, text, _) = env.hermes_with_stdin(&["api-keys", "list"], "").await;
    assert!(text.contains("agent victor"), "{text}");

    let fleet = env.start(&[Service::Ingest]).await;
    let mcp = Mcp::new(&fleet, &agent_key);
    assert_eq!(mcp.ok("agents.me", json!({})).await["profileKey"], "victor");
    let (status, body) = mcp.rest("agents.me", json!({})).await;
    assert_eq!(
        (status, body["profileKey"].clone()),
        (StatusCode::OK, json!("victor"))
    );
    // The third request of the minute is over the key's rate, on either transport.
    let (status, body) = mcp
        .post_raw(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    assert_eq!(body["error"]["code"], -32002);
    let (status, body) = mcp.rest("agents.me", json!({})).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["error"]["code"], "rate_limited");
    fleet.stop().await.unwrap();
}

/// The status a server answers to `head` (a request's line and headers, its body never sent).
async fn status_of_head(addr: std::net::SocketAddr, head: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    // Bounded: a server waiting for the body would never answer.
    tokio::time::timeout(Duration::from_secs(30), async {
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed without an answer");
            answer.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("an answer from the head alone");
    let line = String::from_utf8_lossy(&answer);
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}
