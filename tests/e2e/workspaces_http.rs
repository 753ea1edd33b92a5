//! Workspaces over HTTP (docs/agents.md, "Workspaces over HTTP"), as the multi-provider
//! document's quickstart drives them: a workspace made with `provider:model` waits
//! `provisioning` for its provider's key, a global key put by `PUT /settings/secrets` makes
//! it `ready` and answers the fleet's calls, and an empty workspace value clears that key
//! for the workspace alone. Only the operator reaches the routes; no value is ever echoed.

use hermes::Service;
use hermes_testkit::{KEY, TestEnv};
use reqwest::Method;
use serde_json::{Value, json};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET_KEYS: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const ANTHROPIC_KEY: &str = "sk-ant-global-0123456789";

/// Every tier answered by Claude through Anthropic's own API, named `provider:model`.
const TOML: &str = r#"
[tiers]
free = ["anthropic:claude-sonnet-4-5"]
starter = ["anthropic:claude-sonnet-4-5"]
pro = ["anthropic:claude-sonnet-4-5"]
venue-growth = ["anthropic:claude-sonnet-4-5"]
"#;

/// Anthropic's Messages API, answering only the global key.
async fn anthropic() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(header("x-api-key", ANTHROPIC_KEY))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "from Claude"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 12, "output_tokens": 3}
        })))
        .mount(&server)
        .await;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspace_is_provisioning_until_a_global_key_is_put_and_a_workspace_value_clears_it() {
    let claude = anthropic().await;
    let file = std::env::temp_dir().join(format!("hermes-ws-{}.toml", uuid::Uuid::now_v7()));
    std::fs::write(&file, TOML).unwrap();
    let mut env = TestEnv::new().await;
    env.set("HERMES_CONFIG", file.to_str().unwrap())
        .set("HERMES_SECRET_KEYS", SECRET_KEYS)
        .set("ANTHROPIC_BASE_URL", &claude.uri());
    let (code, out, err) = env
        .hermes_with_stdin(
            &[
                "api-keys", "create", "--json", "--name", "c", "--scope", "chat",
            ],
            "",
        )
        .await;
    assert_eq!(code, 0, "{err}");
    let chat_key = serde_json::from_str::<Value>(&out).unwrap()["key"]
        .as_str()
        .unwrap()
        .to_string();
    let fleet = env.start(&Service::ALL).await;
    let ask = json!({"name": "hermes-anthropic", "role": "Inference worker", "runtime": "hermes",
                     "model": "anthropic:claude-sonnet-4-5"});

    // Only the operator: no key is 401, a key without the operator scope 403.
    let resp = fleet.post("/workspaces").json(&ask).send().await.unwrap();
    assert_eq!(resp.status(), 401);
    let (status, _) = fleet.post_json("/workspaces", &chat_key, &ask).await;
    assert_eq!(status, 403);

    // Bad input is named.
    let (status, body) = fleet
        .post_json(
            "/workspaces",
            KEY,
            &json!({"name": "w", "model": "acme:model-1"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "unknown_provider", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("anthropic"),
        "{body}"
    );
    let (status, _) = fleet
        .post_json(
            "/workspaces",
            KEY,
            &json!({"name": "w", "runtime": "langgraph"}),
        )
        .await;
    assert_eq!(status, 400);

    // No Anthropic key anywhere: provisioning, waiting for it.
    let (status, made) = fleet.post_json("/workspaces", KEY, &ask).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(made["status"], "provisioning");
    assert_eq!(made["waiting_for"], "ANTHROPIC_API_KEY");
    assert_eq!(made["model"], "anthropic:claude-sonnet-4-5");
    assert_eq!(made["slug"], "hermes-anthropic");
    let id = made["id"].as_str().unwrap().to_string();
    let (status, _) = fleet.post_json("/workspaces", KEY, &ask).await;
    assert_eq!(status, 409, "the same name again");

    // The global key: never echoed, stored sealed, and the workspace is ready.
    let put = |path: String, value: &str| {
        let body = json!({"key": "ANTHROPIC_API_KEY", "value": value});
        let fleet = &fleet;
        async move { fleet.call(Method::PUT, &path, KEY, Some(&body)).await }
    };
    let (status, body) = put("/settings/secrets".into(), ANTHROPIC_KEY).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"key": "ANTHROPIC_API_KEY", "set": true}));
    let stored: String = env
        .db()
        .get()
        .await
        .unwrap()
        .query_one("SELECT value_enc FROM global_secrets", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!stored.contains(ANTHROPIC_KEY));
    let (status, shown) = fleet.get_json(&format!("/workspaces/{id}"), KEY).await;
    assert_eq!(status, 200);
    assert_eq!(shown["status"], "ready", "{shown}");
    assert!(!shown.to_string().contains(ANTHROPIC_KEY));

    // The fleet's calls use it (Anthropic answers only that key).
    let resp = fleet.chat("who answers?").await;
    assert_eq!(resp.status(), 200);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "from Claude");

    // An empty workspace value clears the global key for that workspace alone.
    let (status, body) = put(format!("/workspaces/{id}/secrets"), "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["cleared"], true);
    let (_, shown) = fleet.get_json(&format!("/workspaces/{id}"), KEY).await;
    assert_eq!(shown["status"], "provisioning", "{shown}");
    assert_eq!(
        shown["secrets"],
        json!([{"key": "ANTHROPIC_API_KEY", "cleared": true}])
    );
    let (status, _) = fleet
        .get_json("/workspaces/00000000-0000-0000-0000-000000000000", KEY)
        .await;
    assert_eq!(status, 404);
    fleet.stop().await.unwrap();
    let _ = std::fs::remove_file(file);
}
