//! `API_SERVER_ENABLED=false` (docs/api.md, turning the API off): ingest still takes the
//! channels' webhooks, but the API's routes are not served: they answer 404 like any
//! unknown path, even with the operator key.

use hermes::Service;
use hermes_testkit::{KEY, openai_fake, telegram_text};
use hermes_types::model::Platform;
use serde_json::json;

use crate::agent_mcp::{TG_SECRET, env_with, peer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_api_off_only_webhooks_are_served() {
    let (peer, model) = (peer().await, openai_fake("noted").await);
    let mut env = env_with(&peer).await;
    env.openai_mock(&model.uri())
        .set("API_SERVER_ENABLED", "false");
    env.user(Platform::Telegram, "5454", 5).await;
    let fleet = env.start(&Service::ALL).await;

    let chat = json!({"model": "hermes", "messages": [{"role": "user", "content": "hi"}]});
    let (status, body) = fleet.post_json("/v1/chat/completions", KEY, &chat).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "not_found");
    for path in [
        "/v1/models",
        "/openapi.json",
        "/api/jobs",
        "/health/detailed",
        "/v1/runs",
    ] {
        let (status, body) = fleet.get_json(path, KEY).await;
        assert_eq!(status, 404, "{path}: {body}");
    }
    let (status, _) = fleet
        .post_json("/v1/responses", KEY, &json!({"input": "hi"}))
        .await;
    assert_eq!(status, 404);

    // The webhooks are served as ever (the helper asserts the 200), and liveness too.
    fleet
        .telegram_update(TG_SECRET, &telegram_text(5454, 1, "still there?"))
        .await;
    let (status, _) = fleet.get_json("/health", KEY).await;
    assert_eq!(status, 200);
    fleet.stop().await.unwrap();
}
