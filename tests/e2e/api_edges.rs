//! The edges of the HTTP API: CORS (off by default, an allowlist, preflights without a key,
//! headers on errors and streams), `GET /v1/capabilities` flags that only claim mounted
//! routes, `GET /health/detailed`, the advertised model name, and the operator's core
//! prompt under the caller's own system message.

use std::time::Duration;

use hermes::Service;
use hermes_testkit::{KEY, TestEnv, eventually};
use hermes_types::model::Platform;
use serde_json::{Value, json};

const ALLOWED: &str = "http://app.example:3000";

/// A browser's preflight of a POST from `origin`, without a key (browsers send none).
async fn preflight(fleet: &hermes_testkit::Fleet, origin: &str) -> reqwest::Response {
    reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, fleet.url("/v1/chat/completions"))
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, idempotency-key",
        )
        .send()
        .await
        .unwrap()
}

/// GET `path` with the operator's key, as JSON.
pub(crate) async fn get_json(fleet: &hermes_testkit::Fleet, path: &str) -> Value {
    reqwest::Client::new()
        .get(fleet.url(path))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn has_cors(resp: &reqwest::Response) -> bool {
    resp.headers()
        .keys()
        .any(|k| k.as_str().starts_with("access-control-"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_allowlist_no_answer_carries_cors_headers() {
    let env = TestEnv::new().await;
    let fleet = env.start(&[Service::Ingest]).await;
    let resp = preflight(&fleet, ALLOWED).await;
    assert!(!has_cors(&resp), "{:?}", resp.headers());
    let resp = reqwest::Client::new()
        .get(fleet.url("/v1/models"))
        .bearer_auth(KEY)
        .header("origin", ALLOWED)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(!has_cors(&resp), "{:?}", resp.headers());
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_origin_gets_cors_on_preflights_errors_and_streams_and_another_gets_none() {
    let mut env = TestEnv::new().await;
    env.set(
        "API_SERVER_CORS_ORIGINS",
        &format!("https://other.example, {ALLOWED}"),
    );
    let fleet = env.start(&Service::ALL).await;

    // The preflight is answered without a key, with the allowed methods and headers.
    let resp = preflight(&fleet, ALLOWED).await;
    assert_eq!(resp.status(), 204);
    let h = resp.headers();
    assert_eq!(h["access-control-allow-origin"], ALLOWED);
    assert_eq!(h["access-control-max-age"], "600");
    let methods = h["access-control-allow-methods"].to_str().unwrap();
    assert!(
        methods.contains("POST") && methods.contains("DELETE"),
        "{methods}"
    );
    let headers = h["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    for needed in [
        "authorization",
        "content-type",
        "idempotency-key",
        "last-event-id",
        "traceparent",
    ] {
        assert!(headers.contains(needed), "{needed} in {headers}");
    }

    // Another origin: nothing that would let a browser read the answer.
    let resp = preflight(&fleet, "https://evil.example").await;
    assert!(!has_cors(&resp), "{:?}", resp.headers());

    // An error answer (no key) still carries them, so the page can read the 401.
    let resp = reqwest::Client::new()
        .post(fleet.url("/v1/chat/completions"))
        .header("origin", ALLOWED)
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["access-control-allow-origin"], ALLOWED);
    let exposed = resp.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(exposed.contains("x-hermes-run-id"), "{exposed}");

    // And a streamed answer, for EventSource-style readers.
    let mut resp = reqwest::Client::new()
        .post(fleet.url("/v1/chat/completions"))
        .bearer_auth(KEY)
        .header("origin", ALLOWED)
        .json(&json!({"messages": [{"role": "user", "content": "stream to a browser"}], "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert_eq!(resp.headers()["access-control-allow-origin"], ALLOWED);
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    assert!(
        String::from_utf8(body)
            .unwrap()
            .ends_with("data: [DONE]\n\n")
    );

    // The same stream asked by another origin has no CORS header.
    let resp = reqwest::Client::new()
        .get(fleet.url("/v1/models"))
        .bearer_auth(KEY)
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(!has_cors(&resp), "{:?}", resp.headers());
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_capability_claimed_is_a_route_that_answers() {
    let mut env = TestEnv::new().await;
    env.set("API_SERVER_MODEL_NAME", "hermes-edge");
    let fleet = env.start(&[Service::Ingest]).await;
    let http = reqwest::Client::new();
    let caps = get_json(&fleet, "/v1/capabilities").await;
    assert_eq!(caps["object"], "hermes.api_server.capabilities");
    assert_eq!(caps["platform"], "hermes");
    assert_eq!(caps["model"], "hermes-edge");
    assert_eq!(caps["auth"], json!({"type": "bearer", "required": true}));
    let features = caps["features"].as_object().unwrap();
    // What this branch serves today.
    for served in [
        "chat_completions",
        "run_status",
        "health_detailed",
        "idempotency",
    ] {
        assert_eq!(features[served], true, "{served}: {caps}");
    }
    assert_eq!(features["cors"], false);
    for (flag, verb, path) in hermes_ingest::routes::FEATURES {
        let Some(true) = features[*flag].as_bool() else {
            continue;
        };
        let url = fleet.url(&path.replace("{id}", &uuid::Uuid::now_v7().to_string()));
        let resp = http
            .request(verb.as_str().parse().unwrap(), url)
            .bearer_auth(KEY)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let body = resp.text().await.unwrap();
        // A missing run may be 404, but never the router's "no such route".
        assert!(
            !body.contains("no such route"),
            "{flag}: {verb:?} {path} is not mounted ({status} {body})"
        );
    }
    let models = get_json(&fleet, "/v1/models").await;
    assert_eq!(models["data"][0]["id"], "hermes-edge");
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detailed_health_reports_dependencies_queues_runs_sessions_and_resources_to_the_operator_only()
 {
    let env = TestEnv::new().await;
    let fleet = env.start(&Service::ALL).await;
    // One run through the fleet, so every queue exists.
    assert_eq!(fleet.chat("warm up").await.status(), 200);
    let http = reqwest::Client::new();
    let resp = http
        .get(fleet.url("/health/detailed"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    // A person's message opens a conversation (an API completion carries its own history
    // and opens none); the answer is read once its run has ended and its session is counted.
    env.user(Platform::Rest, "talker", 5).await;
    hermes_testkit::send(&env.bus().await, "talker", "hello").await;
    let h: Value = eventually(Duration::from_secs(30), "the conversation counted", || {
        let request = http
            .get(fleet.url("/health/detailed"))
            .bearer_auth(KEY)
            .send();
        async move {
            let resp = request.await.unwrap();
            assert_eq!(resp.status(), 200);
            let h: Value = resp.json().await.unwrap();
            (h["active_sessions"] == 1 && h["runs_in_flight"] == 0).then_some(h)
        }
    })
    .await;
    assert_eq!(h["status"], "ok", "{h}");
    for dep in ["postgres", "redis", "rabbitmq"] {
        assert_eq!(h["dependencies"][dep]["ok"], true, "{dep}: {h}");
        assert!(
            h["dependencies"][dep]["latency_ms"].as_f64().is_some(),
            "{h}"
        );
    }
    for stage in ["router", "llm", "tools", "delivery", "webhooks"] {
        assert_eq!(h["queues"][stage]["messages"], 0, "{stage}: {h}");
        assert_eq!(h["queues"][stage]["parked"], 0, "{stage}: {h}");
    }
    assert!(
        h["queues"]["router"]["consumers"].as_u64().unwrap() >= 1,
        "{h}"
    );
    assert_eq!(h["runs_in_flight"], 0, "{h}");
    assert_eq!(h["running_agents"], 0, "{h}");
    assert_eq!(h["session_idle_secs"], 12 * 3600, "{h}");
    let replica = &h["resources"]["replica"];
    for field in ["rss_bytes", "open_fds", "threads"] {
        assert!(replica[field].as_u64().unwrap() > 0, "{field}: {h}");
    }
    assert!(replica["cpu_seconds"].as_f64().unwrap() > 0.0, "{h}");
    let pg = &h["resources"]["connections"]["postgres"];
    let (open, max) = (pg["open"].as_u64().unwrap(), pg["max"].as_u64().unwrap());
    assert!(open >= 1 && open <= max, "{h}");
    assert_eq!(h["resources"]["connections"]["redis"]["open"], 1, "{h}");
    assert_eq!(h["resources"]["connections"]["rabbitmq"]["open"], 2, "{h}");
    assert_eq!(h["version"], env!("CARGO_PKG_VERSION"));
    assert!(h["uptime_secs"].as_u64().is_some());
    fleet.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_prompt_comes_before_the_callers_system_message() {
    let provider = hermes_testkit::openai_fake("ok").await;
    let dir = std::env::temp_dir().join(format!("hermes-core-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("core.txt"),
        "You are Hermes, the operator's agent.",
    )
    .unwrap();
    let config = dir.join("hermes.toml");
    std::fs::write(&config, "[api]\ncore_prompt_file = \"core.txt\"\n").unwrap();
    let mut env = TestEnv::new().await;
    env.openai_mock(&provider.uri())
        .set("HERMES_CONFIG", config.to_str().unwrap());
    let fleet = env.start(&Service::ALL).await;
    let resp = fleet
        .post_chat(&json!({"messages": [
            {"role": "system", "content": "Answer in French."},
            {"role": "user", "content": "hello"},
        ]}))
        .await;
    assert_eq!(resp.status(), 200);
    let calls = provider.received_requests().await.unwrap();
    assert_eq!(calls.len(), 1);
    let sent: Value = calls[0].body_json().unwrap();
    let systems: Vec<&str> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        systems,
        ["You are Hermes, the operator's agent.", "Answer in French."],
        "{sent}"
    );
    fleet.stop().await.unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}
