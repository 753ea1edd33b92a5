//! What a caller is told when a run cannot be answered (docs/security.md, keys and tenants):
//! a code and a sentence, never the provider's own text (which may quote a key); the scrubbed
//! detail stays on the run for operators. A workspace whose provider keys cannot be read is
//! not answered with the global keys instead.

use hermes::Service;
use hermes_db::{agents, api_keys, workspaces};
use hermes_testkit::{KEY, OPENAI_KEY, TestEnv};
use hermes_types::agent::{AgentKind, EngagementMode, Tone};
use serde_json::{Value, json};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::tenants::{final_run, send_as_alice};

/// Send `text` as REST sender `alice` of a fresh key and return the ended run as the key and
/// as the operator see it.
async fn failed_run(env: &TestEnv, text: &str) -> (Value, Value) {
    let client = env.db().get().await.unwrap();
    let key = api_keys::create(&client, "shop", None, None).await.unwrap();
    env.key_user(key.key.id, "alice", 10).await;
    let fleet = env.start(&Service::ALL).await;
    let http = reqwest::Client::new();
    let url = send_as_alice(&fleet, &key.secret_key, text).await;
    let as_key = final_run(&http, &url, &key.secret_key).await;
    let as_operator = final_run(&http, &url, KEY).await;
    fleet.stop().await.unwrap();
    (as_key, as_operator)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_providers_error_text_never_reaches_the_caller() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": "Incorrect API key provided: sk-proj-********************************wxyz. \
                        You can find your API key at https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error", "code": "invalid_api_key"}})))
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri());
    let (run, operator) = failed_run(&env, "hello").await;
    assert_eq!(run["status"], "failed", "{run}");
    let told = run["error"].to_string();
    assert!(
        !told.contains("Incorrect API key") && !told.contains("wxyz") && !told.contains("401"),
        "the caller was told the provider's text: {told}"
    );
    assert!(run["error"]["code"].is_string() && run["error"]["message"].is_string());
    assert!(run["error"].get("detail").is_none());
    // Operators see what happened, scrubbed.
    let detail = operator["error"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("401"), "{operator}");
    assert!(
        !detail.contains(OPENAI_KEY) && !detail.contains("wxyz"),
        "{detail}"
    );
    let stored: Option<String> = env
        .db()
        .get()
        .await
        .unwrap()
        .query_one("SELECT output_text FROM agent_runs", &[])
        .await
        .unwrap()
        .get(0);
    assert!(!stored.unwrap_or_default().contains("Incorrect API key"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_workspace_secrets_fail_the_run_instead_of_using_the_global_keys() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(hermes_testkit::openai_answer("global", 1, 1)),
        )
        .mount(&provider)
        .await;
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri()).set(
        "HERMES_SECRET_KEYS",
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
    );
    let client = env.db().get().await.unwrap();
    // The workspace's own key was sealed with a key the fleet no longer has.
    let foreign = hermes_net::keyring::KeyRing::new(&[secrecy::SecretString::from(
        "ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1-f4CBgoM=".to_string(),
    )])
    .unwrap();
    let ws = workspaces::id_by_slug(&client, "default")
        .await
        .unwrap()
        .unwrap();
    workspaces::set_secret(&client, ws, "OPENAI_API_KEY", "ws-own-key", Some(&foreign))
        .await
        .unwrap();
    agents::create(
        &client,
        &agents::NewAgent {
            workspace: "default",
            profile_key: "mizu",
            kind: AgentKind::Internal,
            display_name: "Mizu",
            tone: Tone::Friendly,
            role: None,
            role_instructions: None,
            tier: None,
            toolsets: &[],
            capabilities: &[],
            webhook_url: None,
            webhook_secret_sealed: None,
            max_concurrent: 10,
            engagement_mode: EngagementMode::Execute,
        },
    )
    .await
    .unwrap();
    let (run, _) = failed_run(&env, "hello").await;
    assert_eq!(
        run["status"], "failed",
        "answered with the global key: {run}"
    );
    assert_eq!(
        run["error"]["code"], "workspace_secrets_unavailable",
        "{run}"
    );
    assert!(
        provider.received_requests().await.unwrap().is_empty(),
        "a provider was called with the global key"
    );
}
