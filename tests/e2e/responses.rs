//! The Responses API through the whole fleet (docs/api.md, "Responses"): create, stream,
//! retrieve and delete; conversations rebuilt from PostgreSQL by `previous_response_id`
//! (tool round included) and by a key's named `conversation`; `store: false`; who may read.

use std::time::Duration;

use hermes::Service;
use hermes_db::api_keys::{self, KeyScope};
use hermes_testkit::{Fleet, KEY, TestEnv, eventually, openai_answer, openai_tool_call};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

pub(crate) async fn retrieve(fleet: &Fleet, key: &str, id: &Value) -> (u16, Value) {
    let path = format!("/v1/responses/{}", id.as_str().unwrap());
    fleet.get_json(&path, key).await
}

async fn delete(fleet: &Fleet, key: &str, id: &Value) -> (u16, Value) {
    let path = format!("/v1/responses/{}", id.as_str().unwrap());
    fleet.call(reqwest::Method::DELETE, &path, key, None).await
}

/// The text of a response's last output item (its answer).
pub(crate) fn answer(response: &Value) -> &str {
    let output = response["output"].as_array().expect("an output list");
    let message = output.last().expect("an answer");
    assert_eq!(message["type"], "message", "{response}");
    message["content"][0]["text"].as_str().unwrap()
}

/// A fleet whose model is `gpt-test` at the fake `provider`.
pub(crate) async fn fleet_on(provider: &MockServer) -> (TestEnv, Fleet) {
    let mut env = TestEnv::new().await;
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test");
    let fleet = env.start(&Service::ALL).await;
    (env, fleet)
}

/// The types of a response's output items, in order.
pub(crate) fn item_types(response: &Value) -> Vec<&str> {
    response["output"]
        .as_array()
        .expect("an output list")
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect()
}

/// A key with the `chat` scope; its secret.
async fn chat_key(env: &TestEnv, name: &str) -> String {
    let client = env.db().get().await.unwrap();
    let created = api_keys::create(&client, name, None, None).await.unwrap();
    assert!(
        api_keys::set_scopes(&client, created.key.id, &[KeyScope::Chat])
            .await
            .unwrap()
    );
    created.secret_key
}

/// The messages of each model call the fake provider received, in order.
async fn calls(provider: &MockServer) -> Vec<Vec<Value>> {
    provider
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            body["messages"].as_array().unwrap().clone()
        })
        .collect()
}

/// `(role, content)` of each message, content as text ("" when none).
fn turns(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .map(|m| {
            let content = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap().to_string(), content)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_is_created_retrieved_and_deleted_for_good() {
    let env = TestEnv::new().await;
    let fleet = env.start(&Service::ALL).await;
    let (status, created) = fleet
        .post_responses(
            KEY,
            &json!({"model": "hermes-agent", "input": "hello responses", "instructions": "be brief",
               "temperature": 0.2, "max_output_tokens": 50}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let id = created["id"].clone();
    assert!(id.as_str().unwrap().starts_with("resp_"), "{created}");
    assert_eq!(created["object"], "response");
    assert_eq!(created["status"], "completed");
    assert_eq!(created["model"], "hermes-agent");
    assert_eq!(created["instructions"], "be brief");
    assert_eq!(created["max_output_tokens"], 50);
    assert!(created["previous_response_id"].is_null() && created["error"].is_null());
    assert_eq!(answer(&created), "echo: hello responses");
    let usage = &created["usage"];
    assert!(usage["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap()
    );

    let (status, got) = retrieve(&fleet, KEY, &id).await;
    assert_eq!(status, 200, "{got}");
    for field in [
        "id",
        "status",
        "output",
        "usage",
        "instructions",
        "model",
        "temperature",
        "max_output_tokens",
    ] {
        assert_eq!(got[field], created[field], "{field}");
    }

    let (status, deleted) = delete(&fleet, KEY, &id).await;
    assert_eq!(status, 200);
    assert_eq!(
        deleted,
        json!({"id": id, "object": "response", "deleted": true})
    );
    let (status, gone) = retrieve(&fleet, KEY, &id).await;
    assert_eq!((status, &gone["error"]["code"]), (404, &json!("not_found")));
    assert_eq!(delete(&fleet, KEY, &id).await.0, 404);
    let (status, refused) = fleet
        .post_responses(
            KEY,
            &json!({"input": "and then?", "previous_response_id": id}),
        )
        .await;
    assert_eq!(status, 404, "{refused}");
    assert_eq!(refused["error"]["code"], "previous_response_not_found");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaining_by_id_replays_earlier_turns_with_their_tool_round() {
    let provider = MockServer::start().await;
    // The third call (the second turn) answers at once.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("and in Paris?"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(
            "Paris is seven hours behind.",
            50,
            7,
        )))
        .with_priority(1)
        .mount(&provider)
        .await;
    // The second call holds the tool's result: the first turn's answer.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(
            "It is evening in Tokyo.",
            40,
            6,
        )))
        .with_priority(2)
        .mount(&provider)
        .await;
    // The first call asks for the time.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_tool_call(
            "current_time",
            &json!({"timezone": "Asia/Tokyo"}),
        )))
        .with_priority(3)
        .mount(&provider)
        .await;
    let (_env, fleet) = fleet_on(&provider).await;

    let (status, first) = fleet
        .post_responses(
            KEY,
            &json!({"input": "what time is it in Tokyo?", "instructions": "first instructions"}),
        )
        .await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        item_types(&first),
        ["function_call", "function_call_output", "message"],
        "{first}"
    );
    let call = &first["output"][0];
    assert_eq!(
        (&call["call_id"], &call["name"]),
        (&json!("call_1"), &json!("current_time"))
    );
    let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"timezone": "Asia/Tokyo"}));
    assert_eq!(first["output"][1]["call_id"], "call_1");
    assert!(
        first["output"][1]["output"]
            .as_str()
            .unwrap()
            .contains("Asia/Tokyo")
    );
    assert_eq!(answer(&first), "It is evening in Tokyo.");
    assert_eq!(first["usage"]["total_tokens"], 85);
    // Retrieved from another request, the tool round is still there (kept on the run).
    let (_, got) = retrieve(&fleet, KEY, &first["id"]).await;
    assert_eq!(got["output"], first["output"]);

    let (status, second) = fleet
        .post_responses(
            KEY,
            &json!({"input": "and in Paris?", "previous_response_id": first["id"],
               "instructions": "second instructions"}),
        )
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["previous_response_id"], first["id"]);
    assert_eq!(answer(&second), "Paris is seven hours behind.");

    let calls = calls(&provider).await;
    assert_eq!(calls.len(), 3);
    let third = &calls[2];
    let roles: Vec<(String, String)> = turns(third);
    let tool_output = first["output"][1]["output"].as_str().unwrap().to_string();
    assert_eq!(
        roles,
        [
            ("system".to_string(), "second instructions".to_string()),
            ("user".into(), "what time is it in Tokyo?".into()),
            ("assistant".into(), String::new()),
            ("tool".into(), tool_output),
            ("assistant".into(), "It is evening in Tokyo.".into()),
            ("user".into(), "and in Paris?".into()),
        ],
        "the earlier turn's instructions are not carried over"
    );
    assert_eq!(third[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        third[2]["tool_calls"][0]["function"]["name"],
        "current_time"
    );
    assert_eq!(third[3]["tool_call_id"], "call_1");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_conversations_belong_to_their_key_and_only_stored_responses_are_kept() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("noted", 5, 1)))
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&format!("{}/v1", provider.uri()))
        .set("HERMES_MODEL", "gpt-test");
    let alice = chat_key(&env, "alice").await;
    let bob = chat_key(&env, "bob").await;
    let fleet = env.start(&Service::ALL).await;

    let say = |key: String, text: &'static str, extra: Value| {
        let fleet = &fleet;
        async move {
            let mut body = json!({"input": text, "conversation": "project"});
            if let (Some(b), Value::Object(extra)) = (body.as_object_mut(), extra) {
                b.extend(extra);
            }
            let (status, r) = fleet.post_responses(&key, &body).await;
            assert_eq!(status, 200, "{r}");
            r
        }
    };
    let a1 = say(alice.clone(), "alpha one", json!({})).await;
    let _a2 = say(alice.clone(), "alpha two", json!({})).await;
    let b1 = say(bob.clone(), "beta one", json!({})).await;
    // Not stored: answered, but neither retrievable nor the conversation's latest.
    let a3 = say(alice.clone(), "alpha secret", json!({"store": false})).await;
    assert_eq!(a3["store"], false);
    assert_eq!(answer(&a3), "noted");
    let _a4 = say(alice.clone(), "alpha four", json!({})).await;

    let calls = calls(&provider).await;
    let users = |n: usize| -> Vec<String> {
        turns(&calls[n])
            .into_iter()
            .filter(|(role, _)| role == "user")
            .map(|(_, text)| text)
            .collect()
    };
    assert_eq!(users(0), ["alpha one"]);
    assert_eq!(users(1), ["alpha one", "alpha two"]);
    assert_eq!(users(2), ["beta one"], "bob's 'project' is his own");
    assert_eq!(users(3), ["alpha one", "alpha two", "alpha secret"]);
    assert_eq!(
        users(4),
        ["alpha one", "alpha two", "alpha four"],
        "the unstored turn is no link of the chain"
    );

    assert_eq!(retrieve(&fleet, &alice, &a3["id"]).await.0, 404);
    // A key reads and chains only its own responses; the operator key reads them all.
    assert_eq!(retrieve(&fleet, &alice, &a1["id"]).await.0, 200);
    assert_eq!(retrieve(&fleet, &bob, &a1["id"]).await.0, 404);
    assert_eq!(delete(&fleet, &bob, &a1["id"]).await.0, 404);
    assert_eq!(retrieve(&fleet, KEY, &a1["id"]).await.0, 200);
    assert_eq!(retrieve(&fleet, &alice, &b1["id"]).await.0, 404);
    let (status, refused) = fleet
        .post_responses(
            &bob,
            &json!({"input": "peek", "previous_response_id": a1["id"]}),
        )
        .await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (404, &json!("previous_response_not_found"))
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_reach_the_model_and_unsupported_content_is_refused() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("a cat", 5, 2)))
        .mount(&provider)
        .await;
    let (_env, fleet) = fleet_on(&provider).await;
    let png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    let (status, r) = fleet
        .post_responses(
            KEY,
            &json!({"input": [{"role": "user", "content": [
                {"type": "input_text", "text": "what is this?"},
                {"type": "input_image", "image_url": png}
            ]}]}),
        )
        .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(answer(&r), "a cat");
    let received = calls(&provider).await;
    let parts = received[0].last().unwrap()["content"]
        .as_array()
        .unwrap()
        .clone();
    let urls: Vec<&str> = parts
        .iter()
        .filter(|p| p["type"] == "image_url")
        .map(|p| p["image_url"]["url"].as_str().unwrap())
        .collect();
    // (http(s) images are fetched through the SSRF guard first: tests/e2e/images.rs.)
    assert_eq!(urls, [png]);

    for (body, code) in [
        (
            json!({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]}),
            "unsupported_content_type",
        ),
        (
            json!({"input": [{"role": "user", "content": [
                {"type": "input_text", "text": "read this"},
                {"type": "input_image", "image_url": "data:application/pdf;base64,JVBERi0xLjQ="}]}]}),
            "unsupported_content_type",
        ),
        // PostgreSQL stores no NUL: refused before anything is kept (found by schemathesis).
        (json!({"input": "a\u{0}b"}), "invalid_request"),
        (
            json!({"input": "x", "previous_response_id": "resp_00000000000000000000000000000000",
                   "conversation": "c"}),
            "invalid_request",
        ),
    ] {
        let (status, e) = fleet.post_responses(KEY, &body).await;
        assert_eq!((status, &e["error"]["code"]), (400, &json!(code)), "{body}");
    }
    assert_eq!(
        calls(&provider).await.len(),
        1,
        "nothing refused reached the model"
    );
    fleet.stop().await.unwrap();
}

/// Retention: a response is swept after `responses_days`, and its run, though older than
/// `runs_days`, stays as long as the response stands on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_keeps_its_run_until_the_response_expires() {
    use hermes_config::Retention;
    use hermes_db::retention::{self, Table};

    let env = TestEnv::new().await;
    let db = env.db();
    let client = db.get().await.unwrap();
    let (with_response, without) = (uuid::Uuid::now_v7(), uuid::Uuid::now_v7());
    client
        .batch_execute(&format!(
            "INSERT INTO agent_runs (id, platform, sender_id, status, tier, created_at)
               VALUES ('{with_response}', 'api', 'api', 'completed', 'free', now() - interval '40 days'),
                      ('{without}', 'api', 'api', 'completed', 'free', now() - interval '40 days');
             INSERT INTO responses (id, run_id, input, store, created_at)
               VALUES (gen_random_uuid(), '{with_response}', '\"hi\"', true, now() - interval '40 days');"
        ))
        .await
        .unwrap();
    let days = |responses_days| Retention {
        runs_days: 30,
        conversations_days: 30,
        statuses_days: 30,
        facts_days: 30,
        ledger_days: 30,
        responses_days,
        forge_deliveries_days: 30,
        sweep_every: Duration::from_secs(1),
    };
    let count = |sql: &'static str| {
        let db = db.clone();
        async move { hermes_testkit::count(&db, sql, &[]).await }
    };
    let swept = retention::sweep(&db, &days(60), 10).await.unwrap();
    assert_eq!(
        swept.removed,
        vec![(Table::AgentRuns, 1)],
        "only the bare run"
    );
    assert_eq!(count("SELECT count(*) FROM responses").await, 1);
    assert_eq!(count("SELECT count(*) FROM agent_runs").await, 1);

    let swept = retention::sweep(&db, &days(35), 10).await.unwrap();
    assert_eq!(
        swept.removed,
        vec![(Table::Responses, 1), (Table::AgentRuns, 1)],
        "the response, then its run"
    );
    assert_eq!(count("SELECT count(*) FROM agent_runs").await, 0);
}

/// A message the broker never accepted leaves no response behind: nothing could answer it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_whose_message_was_refused_is_not_kept() {
    let mut env = TestEnv::new().await;
    let proxy = env.broker_behind_proxy().await;
    env.set("HERMES_PUBLISH_TIMEOUT_SECS", "1");
    let fleet = env.start(&[Service::Ingest]).await;
    proxy.set_stalled(true);
    let (status, refused) = fleet.post_responses(KEY, &json!({"input": "hello?"})).await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (503, &json!("unavailable"))
    );
    proxy.set_stalled(false);
    assert_eq!(
        hermes_testkit::count(&env.db(), "SELECT count(*) FROM responses", &[]).await,
        0
    );
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_continues_a_stored_response_in_its_session_and_only_its_own_keys() {
    let provider = MockServer::start().await;
    // Runs always stream from the model; the response is answered whole.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"stream\":true"))
        .respond_with(crate::runs::sse_text(&["You are ", "Ada."]))
        .with_priority(1)
        .mount(&provider)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer("Hello Ada", 5, 2)))
        .with_priority(2)
        .mount(&provider)
        .await;
    let (env, fleet) = fleet_on(&provider).await;
    let alice = chat_key(&env, "alice").await;
    let bob = chat_key(&env, "bob").await;
    let (status, first) = fleet
        .post_responses(&alice, &json!({"input": "my name is Ada"}))
        .await;
    assert_eq!(status, 200, "{first}");

    let run = crate::runs::start_run(
        &fleet,
        &alice,
        json!({"input": "what is my name?", "previous_response_id": first["id"]}),
    )
    .await;
    let path = format!("/v1/runs/{run}");
    let done = eventually(Duration::from_secs(30), "the run completes", || async {
        let (_, v) = fleet.get_json(&path, &alice).await;
        (v["status"] == "completed").then_some(v)
    })
    .await;
    assert_eq!(done["output"], "You are Ada.");
    // The model saw the stored turn and its answer before the run's own input.
    let last = calls(&provider).await.pop().unwrap();
    let seen: Vec<(String, String)> = turns(&last)
        .into_iter()
        .filter(|(role, _)| role != "system")
        .collect();
    assert_eq!(
        seen,
        [
            ("user".to_string(), "my name is Ada".to_string()),
            ("assistant".to_string(), "Hello Ada".to_string()),
            ("user".to_string(), "what is my name?".to_string()),
        ]
    );

    // Another key's response, or one that never was, is not continued: nothing is started.
    for (key, previous) in [
        (&bob, first["id"].clone()),
        (&alice, json!("resp_00000000000000000000000000000000")),
    ] {
        let (status, refused) = fleet
            .post_json(
                "/v1/runs",
                key,
                &json!({"input": "again", "previous_response_id": previous}),
            )
            .await;
        assert_eq!(status, 404, "{refused}");
        assert_eq!(refused["error"]["code"], "previous_response_not_found");
    }
    assert_eq!(
        calls(&provider).await.len(),
        2,
        "no model call for a refused run"
    );

    // A chain is one conversation: the run and a response continuing the first carry on its
    // session row, and a response that continues nothing opens its own.
    let (status, second) = fleet
        .post_responses(
            &alice,
            &json!({"input": "and again", "previous_response_id": first["id"]}),
        )
        .await;
    assert_eq!(status, 200, "{second}");
    let (status, apart) = fleet
        .post_responses(&alice, &json!({"input": "something else"}))
        .await;
    assert_eq!(status, 200, "{apart}");
    let client = env.db().get().await.unwrap();
    let session_of = |id: &Value| {
        let id = hermes_types::ids::ResponseId::parse_wire(id.as_str().unwrap()).unwrap();
        let client = &client;
        async move {
            client
                .query_one(
                    "SELECT r.session_id FROM responses p JOIN agent_runs r ON r.id = p.run_id
                     WHERE p.id = $1",
                    &[&id],
                )
                .await
                .unwrap()
                .get::<_, Option<uuid::Uuid>>(0)
                .expect("a routed run has its session")
        }
    };
    let chain = session_of(&first["id"]).await;
    assert_eq!(session_of(&second["id"]).await, chain);
    let run_session: Option<uuid::Uuid> = client
        .query_one(
            "SELECT session_id FROM agent_runs WHERE id = $1::text::uuid",
            &[&run],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(run_session, Some(chain));
    assert_ne!(session_of(&apart["id"]).await, chain);
    // The chain's session is the key's, with no user: operators see it as one conversation
    // of three runs.
    let row = client
        .query_one(
            "SELECT s.user_id IS NULL, s.api_key_id = k.id,
                    (SELECT count(*) FROM agent_runs r WHERE r.session_id = s.id)
             FROM sessions s, api_keys k WHERE s.id = $1 AND k.name = 'alice'",
            &[&chain],
        )
        .await
        .unwrap();
    let (no_user, alices, runs): (bool, bool, i64) = (row.get(0), row.get(1), row.get(2));
    assert!(no_user && alices, "an API session belongs to its key");
    assert_eq!(
        runs, 3,
        "the first response, the run and the second response"
    );

    // Operators see it so: one API conversation of the key, its six messages, no user.
    let (_, op_key) = crate::operator_mcp::key_with(&env, &[KeyScope::Operator]).await;
    let mcp = crate::agent_mcp::Mcp::operator(&fleet, &op_key);
    let listed = mcp
        .ok("conversations_list", json!({"platform": "api"}))
        .await;
    let listed = listed["conversations"].as_array().unwrap();
    assert_eq!(
        listed.len(),
        2,
        "the chain and the response apart: {listed:?}"
    );
    let shown = listed
        .iter()
        .find(|c| c["conversation_id"] == json!(chain))
        .expect("the chain is listed");
    assert_eq!(shown["messages"], 6, "{shown}");
    assert!(
        shown["user"].is_null() && shown["api_key_id"].is_string(),
        "{shown}"
    );
    let detail = mcp
        .ok("conversation_get", json!({"conversation_id": chain}))
        .await;
    assert_eq!(detail["open_runs"], json!([]), "{detail}");
    fleet.stop().await.unwrap();
}
