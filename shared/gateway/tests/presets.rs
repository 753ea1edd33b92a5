//! The OpenAI-compatible presets (DeepSeek, Groq, Together, Mistral, Fireworks, xAI) against
//! wiremock fakes, one per provider and all configured at once: each call reaches its own
//! provider's base URL (the override variable honoured) with its own key, each preset's
//! usage quirk is read, and a chain over two presets fails over from one to the other.

mod common;

use hermes_config::BackendKind;
use hermes_gateway::Gateway;
use hermes_gateway::providers::DeltaSink;
use hermes_types::model::{LlmRequest, Tier};
use serde_json::{Value, json};
use uuid::Uuid;
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// Every preset in a chain, named `provider:model` (no `[models]` entry needed).
const CONFIG: &str = r#"
[tiers]
free = ["deepseek:ds-model", "groq:groq-model"]
starter = ["together:together-model", "mistral:mistral-model"]
pro = ["fireworks:fw-model", "xai:xai-model"]
venue-growth = ["deepseek:ds-model"]
"#;

/// A fake per preset, the gateway wired to all six at once.
struct Presets {
    fakes: Vec<(BackendKind, MockServer)>,
    gateway: Gateway,
    _file: std::path::PathBuf,
}

impl Presets {
    fn fake(&self, kind: BackendKind) -> &MockServer {
        &self.fakes.iter().find(|(k, _)| *k == kind).unwrap().1
    }
}

/// The key each fake expects: its own, so a call with another preset's key is not answered.
fn key(kind: BackendKind) -> String {
    format!("sk-{kind}")
}

/// Where the fake of `kind` is mounted: a path of its own under the server, so only the
/// override variable can have pointed the call there.
fn prefix(kind: BackendKind) -> String {
    format!("/{kind}/v1")
}

async fn presets() -> Presets {
    let mut fakes = Vec::new();
    let mut vars: Vec<(String, String)> = vec![
        ("HERMES_PROVIDER".into(), "mock".into()),
        (
            "HERMES_NAMESPACE".into(),
            format!("t{}", &Uuid::now_v7().simple().to_string()[20..]),
        ),
    ];
    for &kind in BackendKind::PRESETS {
        let server = MockServer::start().await;
        vars.push((kind.key_var().unwrap().into(), key(kind)));
        vars.push((
            kind.base_url_var().unwrap().into(),
            format!("{}{}", server.uri(), prefix(kind)),
        ));
        fakes.push((kind, server));
    }
    let file = std::env::temp_dir().join(format!("hermes-presets-{}.toml", Uuid::now_v7()));
    std::fs::write(&file, CONFIG).unwrap();
    let (gateway, _, _) = common::gateway(&vars, &file);
    Presets {
        fakes,
        gateway,
        _file: file,
    }
}

impl Drop for Presets {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self._file);
    }
}

fn request(tier: Tier, chain: &[&str], stream: bool) -> LlmRequest {
    LlmRequest {
        stream,
        ..common::request(tier, chain, "hi")
    }
}

fn answer(text: &str, usage: Value) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "c", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage,
    }))
}

/// Answer only a call of `model` with the preset's own key at its own path.
async fn expect(p: &Presets, kind: BackendKind, model: &str, reply: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path(format!("{}/chat/completions", prefix(kind))))
        .and(header(
            "authorization",
            format!("Bearer {}", key(kind)).as_str(),
        ))
        .and(body_partial_json(json!({"model": model})))
        .respond_with(reply)
        .expect(1)
        .mount(p.fake(kind))
        .await;
}

#[derive(Default)]
struct Collect(std::sync::Mutex<String>);

impl DeltaSink for Collect {
    fn delta(&self, text: &str) {
        self.0.lock().unwrap().push_str(text);
    }
}

#[tokio::test]
async fn each_preset_reaches_its_own_url_with_its_own_key() {
    let p = presets().await;
    let cases = [
        (
            BackendKind::Deepseek,
            "deepseek:ds-model",
            "ds-model",
            Tier::Free,
        ),
        (
            BackendKind::Groq,
            "groq:groq-model",
            "groq-model",
            Tier::Free,
        ),
        (
            BackendKind::Together,
            "together:together-model",
            "together-model",
            Tier::Starter,
        ),
        (
            BackendKind::Mistral,
            "mistral:mistral-model",
            "mistral-model",
            Tier::Starter,
        ),
        (
            BackendKind::Fireworks,
            "fireworks:fw-model",
            "fw-model",
            Tier::Pro,
        ),
        (BackendKind::Xai, "xai:xai-model", "xai-model", Tier::Pro),
    ];
    for (kind, _, model, _) in &cases {
        let usage = json!({"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9});
        expect(&p, *kind, model, answer(&format!("from {kind}"), usage)).await;
    }
    for (kind, name, _, tier) in &cases {
        let served = p
            .gateway
            .complete(&request(*tier, &[name], false), None, None)
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(served.backend, *name);
        assert_eq!(
            served.completion.text.as_deref(),
            Some(format!("from {kind}").as_str())
        );
    }
    for (kind, server) in &p.fakes {
        // Exactly its own call: no preset was sent to another's server.
        assert_eq!(server.received_requests().await.unwrap().len(), 1, "{kind}");
        server.verify().await;
    }
}

#[tokio::test]
async fn two_presets_in_one_chain_fail_over_from_one_to_the_other() {
    let p = presets().await;
    Mock::given(method("POST"))
        .and(path(format!(
            "{}/chat/completions",
            prefix(BackendKind::Deepseek)
        )))
        .respond_with(ResponseTemplate::new(503))
        .mount(p.fake(BackendKind::Deepseek))
        .await;
    let usage = json!({"prompt_tokens": 3, "completion_tokens": 1});
    expect(
        &p,
        BackendKind::Groq,
        "groq-model",
        answer("groq answered", usage),
    )
    .await;
    let served = p
        .gateway
        .complete(
            &request(Tier::Free, &["deepseek:ds-model", "groq:groq-model"], false),
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(served.backend, "groq:groq-model");
    assert_eq!(served.completion.text.as_deref(), Some("groq answered"));
    let ds = p
        .fake(BackendKind::Deepseek)
        .received_requests()
        .await
        .unwrap();
    assert!(!ds.is_empty());
    // DeepSeek was called with its own key, never Groq's.
    assert!(ds.iter().all(|r: &Request| {
        r.headers["authorization"] == format!("Bearer {}", key(BackendKind::Deepseek)).as_str()
    }));
    p.fake(BackendKind::Groq).verify().await;
}

#[tokio::test]
async fn stream_usage_quirks_mistral_unasked_groq_in_x_groq() {
    let p = presets().await;
    let chunk = |v: Value| format!("data: {v}\n\n");
    let text = json!({"id": "c", "choices": [{"index": 0, "delta": {"content": "hey"}, "finish_reason": null}]});
    // Mistral: usage on the finishing chunk, unasked; `stream_options` would be a 422.
    let mistral = [
        chunk(text.clone()),
        chunk(
            json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}}),
        ),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    Mock::given(method("POST"))
        .and(path(format!("{}/chat/completions", prefix(BackendKind::Mistral))))
        .respond_with(move |r: &Request| {
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            if body.get("stream_options").is_some() {
                return ResponseTemplate::new(422).set_body_json(json!({"object": "error",
                    "message": {"detail": [{"type": "extra_forbidden", "loc": ["body", "stream_options"]}]}}));
            }
            ResponseTemplate::new(200)
                .set_body_raw(mistral.clone().into_bytes(), "text/event-stream")
        })
        .mount(p.fake(BackendKind::Mistral))
        .await;
    // Groq: usage only in `x_groq.usage` of the finishing chunk.
    let groq = [
        chunk(text),
        chunk(json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                     "x_groq": {"id": "req_1", "usage": {"prompt_tokens": 13, "completion_tokens": 6}}})),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    Mock::given(method("POST"))
        .and(path(format!(
            "{}/chat/completions",
            prefix(BackendKind::Groq)
        )))
        .and(body_partial_json(
            json!({"stream": true, "stream_options": {"include_usage": true}}),
        ))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(groq.into_bytes(), "text/event-stream"),
        )
        .mount(p.fake(BackendKind::Groq))
        .await;
    for (tier, name, usage) in [
        (Tier::Starter, "mistral:mistral-model", (11, 5)),
        (Tier::Free, "groq:groq-model", (13, 6)),
    ] {
        let sink = Collect::default();
        let served = p
            .gateway
            .complete(&request(tier, &[name], true), None, Some(&sink))
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(served.backend, name);
        assert_eq!(*sink.0.lock().unwrap(), "hey");
        let u = served.completion.usage;
        assert_eq!((u.input_tokens, u.output_tokens), usage, "{name}");
    }
}
