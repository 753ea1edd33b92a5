//! `provider:model` names through the fleet (docs/models-and-budgets.md, naming a model): a
//! tier chain written that way loads, an API caller's `model` written that way runs on that
//! configured model, and an unknown provider or unconfigured model is a clear 400 before
//! anything is published.

use hermes::Service;
use hermes_testkit::{OPENAI_KEY, TestEnv};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A configuration whose `pro` chain names a model only as `provider:model`; the other
/// tiers (and the API's `free`) keep the built-in logical names, answered by the mock.
const TOML: &str = r#"
[tiers]
free = ["claude-haiku"]
starter = ["claude-haiku"]
pro = ["openai:gpt-test", "claude-haiku"]
venue-growth = ["claude-haiku"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_model_name_runs_on_that_provider_and_unknown_ones_are_refused() {
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(header(
            "authorization",
            format!("Bearer {OPENAI_KEY}").as_str(),
        ))
        .and(body_partial_json(json!({"model": "gpt-test"})))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c1", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "from gpt-test"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        })))
        .expect(1)
        .mount(&provider)
        .await;
    let file = std::env::temp_dir().join(format!("hermes-models-{}.toml", uuid::Uuid::now_v7()));
    std::fs::write(&file, TOML).unwrap();
    let mut env = TestEnv::new().await;
    // The default provider stays the mock; only `openai:` names reach the fake.
    env.set("HERMES_CONFIG", file.to_str().unwrap())
        .set("OPENAI_API_KEY", OPENAI_KEY)
        .set("OPENAI_BASE_URL", &format!("{}/v1", provider.uri()));
    let fleet = env.start(&Service::ALL).await;
    let ask = |model: &str| json!({"model": model, "messages": [{"role": "user", "content": "which model?"}]});

    let resp = fleet.post_chat(&ask("openai:gpt-test")).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"], "from gpt-test",
        "{body}"
    );
    // The caller's name is echoed as given.
    assert_eq!(body["model"], "openai:gpt-test");

    // Today's plain names keep working: echoed, the tier's chain answers.
    let resp = fleet.post_chat(&ask("gpt-x")).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "echo: which model?"
    );
    assert_eq!(body["model"], "gpt-x");

    let resp = fleet.post_chat(&ask("acme:gpt-test")).await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_provider", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"acme\" is not a known provider (known providers: mock, hermes, openrouter, anthropic, gemini, openai, ollama"), "{message}");

    // A known provider, but a model the operator did not configure (nor priced).
    let resp = fleet.post_chat(&ask("openai:gpt-5")).await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("openai:gpt-test"),
        "{body}"
    );
    fleet.stop().await.unwrap();
    provider.verify().await;
    std::fs::remove_file(file).ok();
}
