//! The llm gateway against wiremock fakes of all three wire formats (OpenAI-compatible,
//! Anthropic Messages, Gemini) and the real Redis: failover on the issue's fault list,
//! streaming, tools, billing, the response cache, budgets and their races, the global cap,
//! the killswitch, the call-slot semaphore and the overall deadline.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod common;

use hermes_cache::Cache;
use hermes_gateway::Gateway;
use hermes_gateway::gateway::GatewayError;
use hermes_gateway::providers::{DeltaSink, ProviderError};
use hermes_telemetry::Metrics;
use hermes_types::ids::UserId;
use hermes_types::model::{FailureCode, LlmRequest, Tier, ToolSpec};
use serde_json::{Value, json};
use uuid::Uuid;
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const CONFIG: &str = r#"
[tiers]
free = ["gpt", "claude"]
starter = ["ollama", "claude"]
pro = ["gem"]
venue-growth = ["claude", "gem"]

[models.gpt]
id = "gpt-4o-mini"
backend = "openai"
max_output_tokens = 100
input_price = "0.15"
output_price = "0.60"

[models.claude]
id = "claude-haiku-4-5-20251001"
backend = "anthropic"
max_output_tokens = 100
input_price = "0.80"
output_price = "4.00"

[models.gem]
id = "gemini-2.5-flash"
backend = "gemini"
max_output_tokens = 100
input_price = "0.30"
output_price = "2.50"

[models.ollama]
id = "llama3.1"
backend = "ollama"
max_output_tokens = 100

[router]
vision_model = "claude"
"#;

/// The three fakes (plus one for Ollama) and a gateway wired to them.
struct Fleet {
    openai: MockServer,
    anthropic: MockServer,
    gemini: MockServer,
    ollama: MockServer,
    gateway: Gateway,
    metrics: Metrics,
    /// The gateway's Redis, to read and plant keys as an operator's older build left them.
    cache: Cache,
    _dir: TempDir,
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Build a fleet; `extra_toml` is appended to [`CONFIG`], `env` overrides variables.
async fn fleet(extra_toml: &str, env: &[(&str, &str)]) -> Fleet {
    let openai = MockServer::start().await;
    let anthropic = MockServer::start().await;
    let gemini = MockServer::start().await;
    let ollama = MockServer::start().await;
    let id = Uuid::now_v7().simple().to_string();
    let dir = std::env::temp_dir().join(format!("hermes-gw-{id}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hermes.toml");
    std::fs::write(&file, format!("{CONFIG}\n{extra_toml}")).unwrap();
    let ns = format!("t{}", &id[20..]);
    let mut vars: Vec<(String, String)> = vec![
        ("OPENAI_API_KEY".into(), "sk-openai".into()),
        ("ANTHROPIC_API_KEY".into(), "sk-ant".into()),
        ("GEMINI_API_KEY".into(), "gm-key".into()),
        ("OPENAI_BASE_URL".into(), openai.uri()),
        ("ANTHROPIC_BASE_URL".into(), anthropic.uri()),
        ("GEMINI_BASE_URL".into(), gemini.uri()),
        ("OLLAMA_BASE_URL".into(), format!("{}/v1", ollama.uri())),
        ("HERMES_NAMESPACE".into(), ns),
    ];
    for (k, v) in env {
        vars.retain(|(n, _)| n != k);
        vars.push((k.to_string(), v.to_string()));
    }
    let (gateway, metrics, cache) = common::gateway(&vars, &file);
    Fleet {
        cache,
        openai,
        anthropic,
        gemini,
        ollama,
        gateway,
        metrics,
        _dir: TempDir(dir),
    }
}

use common::request;

fn free(text: &str) -> LlmRequest {
    request(Tier::Free, &["gpt", "claude"], text)
}

fn tool() -> ToolSpec {
    ToolSpec {
        name: "current_time".into(),
        description: "The current time in a timezone.".into(),
        parameters: json!({"type": "object", "properties": {"timezone": {"type": "string"}}}),
        toolset: "builtin".into(),
    }
}

fn openai_ok(text: &str, input: u64, output: u64) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}
    }))
}

fn anthropic_ok(text: &str, input: u64, output: u64) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-haiku-4-5-20251001",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": input, "output_tokens": output,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    }))
}

fn sse(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_raw(body.as_bytes().to_vec(), "text/event-stream")
}

fn openai_chunk(text: &str) -> String {
    format!(
        "data: {}\n\n",
        json!({"id": "c", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
    )
}

async fn on_openai(f: &Fleet, r: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(r)
        .mount(&f.openai)
        .await;
}

async fn on_anthropic(f: &Fleet, r: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(r)
        .mount(&f.anthropic)
        .await;
}

async fn hits(server: &MockServer) -> usize {
    server.received_requests().await.unwrap_or_default().len()
}

fn fallbacks(f: &Fleet, tier: &str) -> u64 {
    f.metrics.llm.fallbacks.with_label_values(&[tier]).get()
}

#[derive(Default)]
struct Collect(std::sync::Mutex<String>);

impl DeltaSink for Collect {
    fn delta(&self, text: &str) {
        self.0.lock().unwrap().push_str(text);
    }
}

impl Collect {
    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

// ---- the fault list ---------------------------------------------------------------------

#[tokio::test]
async fn a_429_with_retry_after_is_waited_out_on_the_same_backend() {
    let f = fleet("", &[]).await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(ResponseTemplate::new(429).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .mount(&f.openai)
        .await;
    on_openai(&f, openai_ok("after the wait", 10, 5)).await;
    let started = Instant::now();
    let s = f.gateway.complete(&free("hi"), None, None).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(s.backend, "gpt");
    assert_eq!(s.completion.text.as_deref(), Some("after the wait"));
    assert_eq!(hits(&f.openai).await, 2);
    assert_eq!(hits(&f.anthropic).await, 0);
    assert_eq!(fallbacks(&f, "free"), 0);
    // 10 × $0.15/M + 5 × $0.60/M = 4.5 µ$ → 5 (half up); the 429 attempt is not billed.
    assert_eq!(s.completion.usage.cost_micro_usd, 5);
}

#[tokio::test]
async fn a_429_without_retry_after_fails_over_and_bills_only_the_answer() {
    let f = fleet("", &[]).await;
    on_openai(&f, ResponseTemplate::new(429)).await;
    on_anthropic(&f, anthropic_ok("from claude", 1000, 200)).await;
    let s = f.gateway.complete(&free("hi"), None, None).await.unwrap();
    assert_eq!(s.backend, "claude");
    assert_eq!(fallbacks(&f, "free"), 1);
    // 1000 × $0.80/M + 200 × $4.00/M = 800 + 800 µ$.
    assert_eq!(s.completion.usage.cost_micro_usd, 1600);
    assert_eq!(
        f.metrics
            .llm
            .errors
            .with_label_values(&["gpt", "rate_limited"])
            .get(),
        1
    );
    assert_eq!(
        f.metrics
            .llm
            .calls
            .with_label_values(&["gpt", "free"])
            .get(),
        0
    );
    let cost = f
        .metrics
        .llm
        .cost
        .with_label_values(&["claude", "free"])
        .get();
    assert!((cost - 0.0016).abs() < 1e-12, "{cost}");
}

#[tokio::test]
async fn a_500_once_fails_over_and_the_primary_answers_the_next_call() {
    let f = fleet("", &[]).await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(ResponseTemplate::new(500).set_body_string("oops"))
        .up_to_n_times(1)
        .mount(&f.openai)
        .await;
    on_openai(&f, openai_ok("primary", 3, 1)).await;
    on_anthropic(&f, anthropic_ok("secondary", 3, 1)).await;
    let first = f.gateway.complete(&free("one"), None, None).await.unwrap();
    let second = f.gateway.complete(&free("two"), None, None).await.unwrap();
    assert_eq!(first.backend, "claude");
    assert_eq!(second.backend, "gpt");
    assert_eq!(fallbacks(&f, "free"), 1);
}

#[tokio::test]
async fn a_503_always_sends_every_call_to_the_next_backend() {
    let f = fleet("", &[]).await;
    on_openai(&f, ResponseTemplate::new(503)).await;
    on_anthropic(&f, anthropic_ok("secondary", 3, 1)).await;
    for i in 0..3 {
        let s = f
            .gateway
            .complete(&free(&format!("q{i}")), None, None)
            .await
            .unwrap();
        assert_eq!(s.backend, "claude");
    }
    assert_eq!(fallbacks(&f, "free"), 3);
    assert_eq!(
        f.metrics
            .llm
            .errors
            .with_label_values(&["gpt", "server_error"])
            .get(),
        3
    );
}

#[tokio::test]
async fn a_reset_connection_fails_over() {
    // A server that accepts and hangs up at once: the client sees a reset/closed connection.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            drop(sock);
        }
    });
    let url = format!("http://{addr}");
    let f = fleet("", &[("OPENAI_BASE_URL", &url)]).await;
    on_anthropic(&f, anthropic_ok("secondary", 3, 1)).await;
    let s = f.gateway.complete(&free("hi"), None, None).await.unwrap();
    assert_eq!(s.backend, "claude");
    assert_eq!(
        f.metrics
            .llm
            .errors
            .with_label_values(&["gpt", "connect"])
            .get(),
        1
    );
}

#[tokio::test]
async fn no_response_times_out_and_fails_over() {
    let f = fleet("[llm]\nattempt_timeout_secs = 1\n", &[]).await;
    on_openai(
        &f,
        openai_ok("too late", 1, 1).set_delay(Duration::from_secs(10)),
    )
    .await;
    on_anthropic(&f, anthropic_ok("in time", 3, 1)).await;
    let started = Instant::now();
    let s = f.gateway.complete(&free("hi"), None, None).await.unwrap();
    assert_eq!(s.backend, "claude");
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(
        f.metrics
            .llm
            .errors
            .with_label_values(&["gpt", "timeout"])
            .get(),
        1
    );
}

#[tokio::test]
async fn a_slow_first_token_fails_over_before_any_byte_reaches_the_caller() {
    let f = fleet("[llm]\nfirst_token_timeout_secs = 1\n", &[]).await;
    on_openai(
        &f,
        sse(&format!("{}data: [DONE]\n\n", openai_chunk("slow")))
            .set_delay(Duration::from_secs(10)),
    )
    .await;
    on_anthropic(&f, sse(include_str!("fixtures/anthropic/stream_text.sse"))).await;
    let sink = Collect::default();
    let mut req = free("hi");
    req.stream = true;
    let s = f.gateway.complete(&req, None, Some(&sink)).await.unwrap();
    assert_eq!(s.backend, "claude");
    assert!(!sink.text().contains("slow"));
    assert_eq!(Some(sink.text()), s.completion.text);
}

#[tokio::test]
async fn a_stream_cut_after_some_tokens_fails_without_failover_or_billing() {
    let f = fleet(
        "[llm.budgets.free]\ndaily_tokens = 100000\nmonthly_tokens = 1000000\n",
        &[],
    )
    .await;
    on_openai(
        &f,
        sse(&format!(
            "{}{}",
            openai_chunk("Hello"),
            openai_chunk(" wor")
        )),
    )
    .await;
    on_anthropic(&f, anthropic_ok("never", 1, 1)).await;
    let user = UserId::new();
    let sink = Collect::default();
    let mut req = free("hi");
    req.stream = true;
    let err = f
        .gateway
        .complete(&req, Some(user), Some(&sink))
        .await
        .err()
        .unwrap();
    assert!(
        matches!(err, GatewayError::Provider(ProviderError::Interrupted(_))),
        "{err}"
    );
    assert_eq!(err.code(), FailureCode::ProvidersUnavailable);
    assert_eq!(sink.text(), "Hello wor");
    assert_eq!(
        hits(&f.anthropic).await,
        0,
        "a caller holding half an answer is not handed another"
    );
    assert_eq!(
        f.gateway.budgets().used(user).await.unwrap(),
        (0, 0),
        "the reservation is released"
    );
    assert_eq!(
        f.metrics.llm.cost.with_label_values(&["gpt", "free"]).get(),
        0.0
    );
}

#[tokio::test]
async fn a_malformed_first_chunk_fails_over() {
    let f = fleet("", &[]).await;
    on_openai(&f, sse("data: {\"choices\": [oops\n\n")).await;
    on_anthropic(&f, sse(include_str!("fixtures/anthropic/stream_text.sse"))).await;
    let sink = Collect::default();
    let mut req = free("hi");
    req.stream = true;
    let s = f.gateway.complete(&req, None, Some(&sink)).await.unwrap();
    assert_eq!(s.backend, "claude");
    assert_eq!(
        f.metrics
            .llm
            .errors
            .with_label_values(&["gpt", "malformed"])
            .get(),
        1
    );
}

#[tokio::test]
async fn a_missing_done_is_whole_only_after_finish_reason_and_usage() {
    let f = fleet("", &[]).await;
    let complete_but_no_done = format!(
        "{}data: {}\n\ndata: {}\n\n",
        openai_chunk("All there."),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
    );
    on_openai(&f, sse(&complete_but_no_done)).await;
    let sink = Collect::default();
    let mut req = free("hi");
    req.stream = true;
    let s = f.gateway.complete(&req, None, Some(&sink)).await.unwrap();
    assert_eq!(s.backend, "gpt");
    assert_eq!(s.completion.text.as_deref(), Some("All there."));
    assert_eq!(s.completion.usage.output_tokens, 3);
}

#[tokio::test]
async fn a_context_length_400_fails_over_and_a_content_filter_400_stops() {
    let f = fleet("", &[]).await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "This model's maximum context length is 128000 tokens.",
            "type": "invalid_request_error", "code": "context_length_exceeded"}})))
        .up_to_n_times(1)
        .mount(&f.openai)
        .await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "The response was filtered due to the prompt triggering content management policy.",
            "type": "invalid_request_error", "code": "content_filter"}})))
        .mount(&f.openai)
        .await;
    on_anthropic(&f, anthropic_ok("bigger window", 3, 1)).await;
    let s = f.gateway.complete(&free("long"), None, None).await.unwrap();
    assert_eq!(s.backend, "claude");
    let err = f
        .gateway
        .complete(&free("filtered"), None, None)
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), FailureCode::ProviderRejected);
    assert!(err.to_string().contains("content_filter"), "{err}");
    assert_eq!(
        hits(&f.anthropic).await,
        1,
        "a refusal is not retried elsewhere"
    );
}

/// Answers 500 and 200 in turn.
struct Flapping(AtomicUsize);

impl Respond for Flapping {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        if self.0.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
            ResponseTemplate::new(500)
        } else {
            openai_ok("primary", 3, 1)
        }
    }
}

#[tokio::test]
async fn a_flapping_primary_never_loses_an_answer() {
    let f = fleet("", &[]).await;
    Mock::given(method("POST"))
        .and(path("/chat/completions"))
        .respond_with(Flapping(AtomicUsize::new(0)))
        .mount(&f.openai)
        .await;
    on_anthropic(&f, anthropic_ok("secondary", 3, 1)).await;
    let mut by = std::collections::HashMap::<String, u32>::new();
    for i in 0..10 {
        let s = f
            .gateway
            .complete(&free(&format!("q{i}")), None, None)
            .await
            .unwrap();
        *by.entry(s.backend).or_default() += 1;
    }
    // Attempts on the primary alternate fail/ok; every failure was answered by the secondary.
    let failures = f
        .metrics
        .llm
        .errors
        .with_label_values(&["gpt", "server_error"])
        .get();
    assert_eq!(u64::from(by["claude"]), failures);
    assert_eq!(by.values().sum::<u32>(), 10);
    assert_eq!(fallbacks(&f, "free"), failures);
}

#[tokio::test]
async fn when_every_backend_fails_the_error_names_the_last_failure() {
    let f = fleet("", &[]).await;
    on_openai(&f, ResponseTemplate::new(503)).await;
    on_anthropic(
        &f,
        ResponseTemplate::new(529).set_body_json(json!({"type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"}})),
    )
    .await;
    let err = f
        .gateway
        .complete(&free("hi"), None, None)
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), FailureCode::ProvidersUnavailable);
    assert!(
        err.to_string().contains("529") && err.to_string().contains("Overloaded"),
        "{err}"
    );
    assert!(
        err.user_message()
            .starts_with(hermes_gateway::RETRY_MESSAGE)
    );
}

#[tokio::test]
async fn the_deadline_bounds_the_whole_chain() {
    let f = fleet("", &[("HERMES_LLM_TIMEOUT_SECS", "2")]).await;
    on_openai(
        &f,
        openai_ok("late", 1, 1).set_delay(Duration::from_secs(10)),
    )
    .await;
    on_anthropic(
        &f,
        anthropic_ok("late", 1, 1).set_delay(Duration::from_secs(10)),
    )
    .await;
    let started = Instant::now();
    let err = f
        .gateway
        .complete(&free("hi"), None, None)
        .await
        .err()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert!(
        matches!(err, GatewayError::Provider(ProviderError::Timeout(_))),
        "{err}"
    );
}

// ---- formats, tools, Ollama ---------------------------------------------------------------

#[tokio::test]
async fn ollama_is_skipped_when_the_request_carries_tools() {
    let f = fleet("", &[]).await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(openai_ok("local", 5, 2))
        .mount(&f.ollama)
        .await;
    on_anthropic(&f, anthropic_ok("cloud", 5, 2)).await;
    let mut with_tools = request(Tier::Starter, &["ollama", "claude"], "what time is it?");
    with_tools.tools = vec![tool()];
    let s = f.gateway.complete(&with_tools, None, None).await.unwrap();
    assert_eq!(s.backend, "claude");
    assert_eq!(hits(&f.ollama).await, 0);
    let plain = request(Tier::Starter, &["ollama", "claude"], "hello");
    let s = f.gateway.complete(&plain, None, None).await.unwrap();
    assert_eq!(s.backend, "ollama");
    assert_eq!(
        s.completion.usage.cost_micro_usd, 0,
        "a local model is free"
    );
    let sent: Value = f.ollama.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert!(sent.get("tools").is_none());
    assert!(
        f.ollama.received_requests().await.unwrap()[0]
            .headers
            .get("authorization")
            .is_none(),
        "Ollama gets no key"
    );
}

#[tokio::test]
async fn tool_calls_come_back_from_all_three_formats() {
    let f = fleet("", &[]).await;
    on_openai(
        &f,
        ResponseTemplate::new(200).set_body_json(json!({"choices": [{"index": 0,
            "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "current_time", "arguments": "{\"timezone\":\"Asia/Tokyo\"}"}}]},
            "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 50, "completion_tokens": 12}})),
    )
    .await;
    on_anthropic(
        &f,
        ResponseTemplate::new(200).set_body_raw(
            include_str!("fixtures/anthropic/message_tool_use.json"),
            "application/json",
        ),
    )
    .await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/models/gemini-2\.5-flash:generateContent$"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            include_str!("fixtures/gemini/generate_function_call.json"),
            "application/json",
        ))
        .mount(&f.gemini)
        .await;
    for (tier, chain) in [
        (Tier::Free, vec!["gpt"]),
        (Tier::VenueGrowth, vec!["claude"]),
        (Tier::Pro, vec!["gem"]),
    ] {
        let mut req = request(tier, &chain, "what time is it in Tokyo?");
        req.tools = vec![tool()];
        let s = f.gateway.complete(&req, None, None).await.unwrap();
        assert!(
            !s.completion.tool_calls.is_empty(),
            "{chain:?} returned no tool call"
        );
        assert_eq!(s.completion.finish_reason, "tool_calls", "{chain:?}");
        assert!(
            s.completion.usage.cost_micro_usd > 0,
            "{chain:?} not priced"
        );
        assert!(!s.cache_hit, "tool calls are never cached");
    }
    let sent: Value = f.gemini.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    assert_eq!(sent["systemInstruction"]["parts"][0]["text"], "be brief");
    assert_eq!(
        sent["tools"][0]["functionDeclarations"][0]["name"],
        "current_time"
    );
}

#[tokio::test]
async fn gemini_thinking_tokens_are_billed_as_output() {
    let f = fleet("", &[]).await;
    let fixture: Value =
        serde_json::from_str(include_str!("fixtures/gemini/generate_text.json")).unwrap();
    let meta = &fixture["usageMetadata"];
    let input = meta["promptTokenCount"].as_u64().unwrap();
    let output = meta["candidatesTokenCount"].as_u64().unwrap()
        + meta["thoughtsTokenCount"].as_u64().unwrap_or(0);
    Mock::given(method("POST"))
        .and(path_regex(r":generateContent$"))
        .respond_with(ResponseTemplate::new(200).set_body_json(fixture.clone()))
        .mount(&f.gemini)
        .await;
    let s = f
        .gateway
        .complete(&request(Tier::Pro, &["gem"], "hello"), None, None)
        .await
        .unwrap();
    assert_eq!(s.completion.usage.input_tokens, input);
    assert_eq!(s.completion.usage.output_tokens, output);
    // $0.30/M in, $2.50/M out, rounded half up to whole micro-dollars.
    let micro = (input * 300_000 + output * 2_500_000 + 500_000) / 1_000_000;
    assert_eq!(s.completion.usage.cost_micro_usd, micro);
}

// ---- cache ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_repeated_tool_free_call_is_served_from_the_cache_for_free() {
    let f = fleet(
        "[llm.budgets.free]\ndaily_tokens = 100000\nmonthly_tokens = 1000000\n",
        &[],
    )
    .await;
    on_openai(&f, openai_ok("cached answer", 40, 10)).await;
    let user = UserId::new();
    let first = f
        .gateway
        .complete(&free("same"), Some(user), None)
        .await
        .unwrap();
    let used_after_first = f.gateway.budgets().used(user).await.unwrap();
    let second = f
        .gateway
        .complete(&free("same"), Some(user), None)
        .await
        .unwrap();
    assert!(!first.cache_hit && second.cache_hit);
    assert_eq!(second.completion.text.as_deref(), Some("cached answer"));
    assert_eq!(
        second.completion.usage,
        Default::default(),
        "a hit costs nothing"
    );
    assert_eq!(hits(&f.openai).await, 1);
    assert_eq!(
        f.gateway.budgets().used(user).await.unwrap(),
        used_after_first
    );
    assert_eq!(used_after_first, (50, 50), "settled at the real usage");
    assert_eq!(
        f.metrics
            .llm
            .cache_hits
            .with_label_values(&["gpt", "free"])
            .get(),
        1
    );
    // A streamed caller gets a cached answer as one delta.
    let sink = Collect::default();
    let mut streamed = free("same");
    streamed.stream = true;
    let hit = f
        .gateway
        .complete(&streamed, None, Some(&sink))
        .await
        .unwrap();
    assert!(hit.cache_hit);
    assert_eq!(sink.text(), "cached answer");
    assert_eq!(hits(&f.openai).await, 1);
    // A different temperature is a different question.
    let mut hot = free("same");
    hot.params.temperature = Some(1.5);
    assert!(
        !f.gateway
            .complete(&hot, None, None)
            .await
            .unwrap()
            .cache_hit
    );
    // Calls offering tools always reach the model.
    let mut with_tools = free("same");
    with_tools.tools = vec![tool()];
    f.gateway.complete(&with_tools, None, None).await.unwrap();
    f.gateway.complete(&with_tools, None, None).await.unwrap();
    assert_eq!(hits(&f.openai).await, 4);
}

// ---- budgets, cap, killswitch, slots ------------------------------------------------------

#[tokio::test]
async fn a_hundred_concurrent_calls_against_a_budget_that_fits_ten() {
    // Each call reserves ceil(len("be brief" + "q")/4) + 100 = 3 + 100 = 103 tokens.
    let f = fleet(
        "[llm.cache]\nenabled = false\n[llm.budgets.free]\ndaily_tokens = 1030\nmonthly_tokens = 100000\n",
        &[],
    )
    .await;
    on_openai(
        &f,
        openai_ok("ok", 3, 2).set_delay(Duration::from_millis(300)),
    )
    .await;
    let user = UserId::new();
    let gateway = Arc::new(f.gateway.clone());
    let calls = (0..100).map(|_| {
        let g = gateway.clone();
        tokio::spawn(async move { g.complete(&free("q"), Some(user), None).await })
    });
    let results = futures_util::future::join_all(calls).await;
    let answered = results.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
    let refused = results
        .iter()
        .filter(|r| matches!(r, Ok(Err(e)) if e.code() == FailureCode::BudgetExceeded))
        .count();
    assert_eq!((answered, refused), (10, 90));
    assert_eq!(hits(&f.openai).await, 10);
    assert_eq!(
        f.gateway.budgets().used(user).await.unwrap(),
        (50, 50),
        "ten calls of 5 real tokens each"
    );
    assert_eq!(
        f.metrics
            .budgets
            .rejections
            .with_label_values(&["user_daily"])
            .get(),
        90
    );
}

#[tokio::test]
async fn without_a_database_and_with_redis_down_per_user_budgets_deny_and_the_global_cap_allows() {
    // A gateway built without PostgreSQL keeps budgets in Redis alone; with a database
    // they fall back to it (tests/budget_durable.rs).
    let f = fleet(
        "[llm.cache]\nenabled = false\n",
        &[
            ("REDIS_URL", "redis://127.0.0.1:1"),
            ("LLM_GLOBAL_DAILY_BUDGET_USD", "1.00"),
        ],
    )
    .await;
    on_openai(&f, openai_ok("still answering", 3, 2)).await;
    let err = f
        .gateway
        .complete(&free("hi"), Some(UserId::new()), None)
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), FailureCode::BudgetUnavailable);
    assert!(err.user_message().contains("usage allowance"));
    assert_eq!(hits(&f.openai).await, 0, "fail closed: no unmetered call");
    let s = f.gateway.complete(&free("hi"), None, None).await.unwrap();
    assert_eq!(s.completion.text.as_deref(), Some("still answering"));
    assert!(f.metrics.budgets.fail_open.get() >= 1);
}

#[tokio::test]
async fn the_global_cap_and_the_killswitch_block_every_call() {
    let f = fleet(
        "[llm.cache]\nenabled = false\n",
        &[("LLM_GLOBAL_DAILY_BUDGET_USD", "0.001")],
    )
    .await;
    // 1000 × $0.15/M + 1500 × $0.60/M = 1,050 µ$: over the $0.001 cap after one call.
    on_openai(&f, openai_ok("pricey", 1000, 1500)).await;
    f.gateway.complete(&free("one"), None, None).await.unwrap();
    let err = f
        .gateway
        .complete(&free("two"), None, None)
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), FailureCode::SpendingPaused);
    let status = f.gateway.budgets().status().await.unwrap();
    assert!((status.spent_today_usd - 0.00105).abs() < 1e-9);

    let g = fleet("[llm.cache]\nenabled = false\n", &[]).await;
    on_openai(&g, openai_ok("ok", 1, 1)).await;
    g.gateway.budgets().killswitch_on("test").await.unwrap();
    let err = g
        .gateway
        .complete(&free("hi"), None, None)
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), FailureCode::SpendingPaused);
    assert_eq!(hits(&g.openai).await, 0);
    assert_eq!(
        g.metrics
            .budgets
            .rejections
            .with_label_values(&["killswitch"])
            .get(),
        1
    );
    assert!(g.gateway.budgets().killswitch_off().await.unwrap());
    g.gateway.complete(&free("hi"), None, None).await.unwrap();
}

#[tokio::test]
async fn calls_beyond_the_slots_wait_then_get_a_capacity_reply() {
    let f = fleet(
        "[llm]\nmax_concurrent = 1\nmax_wait_ms = 200\n[llm.cache]\nenabled = false\n",
        &[],
    )
    .await;
    on_openai(
        &f,
        openai_ok("slow", 1, 1).set_delay(Duration::from_millis(800)),
    )
    .await;
    let (ra, rb) = (free("a"), free("b"));
    let (a, b) = tokio::join!(
        f.gateway.complete(&ra, None, None),
        f.gateway.complete(&rb, None, None)
    );
    let refused = [&a, &b]
        .iter()
        .filter(|r| matches!(r, Err(GatewayError::Capacity(_))))
        .count();
    assert_eq!(refused, 1);
    assert_eq!(
        [a, b].into_iter().find_map(|r| r.err()).unwrap().code(),
        FailureCode::Capacity
    );
    assert!(f.metrics.llm.semaphore_wait.get_sample_count() >= 2);
    assert_eq!(f.metrics.llm.in_flight.get(), 0, "every slot given back");
    assert!(f.metrics.llm.overhead.get_sample_count() >= 2);
}

/// Wait until `ready` holds, polling; fails after 5 s naming `what`.
async fn eventually<F, Fut>(what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut poll = tokio::time::interval(Duration::from_millis(10));
    while !ready().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        poll.tick().await;
    }
}

/// Wait until `user`'s budget reads `want` (a release spawned from a drop lands a moment
/// later).
async fn budget_reaches(f: &Fleet, user: UserId, want: (u64, u64)) {
    eventually("the budget is released", || async {
        f.gateway.budgets().used(user).await.unwrap() == want
    })
    .await;
}

#[tokio::test]
async fn a_capacity_refusal_releases_the_reservation() {
    let f = fleet(
        "[llm]\nmax_concurrent = 1\nmax_wait_ms = 200\n[llm.cache]\nenabled = false\n\
         [llm.budgets.free]\ndaily_tokens = 100000\nmonthly_tokens = 1000000\n",
        &[],
    )
    .await;
    on_openai(
        &f,
        openai_ok("slow", 1, 1).set_delay(Duration::from_millis(800)),
    )
    .await;
    let user = UserId::new();
    let (ra, rb) = (free("a"), free("b"));
    let (a, b) = tokio::join!(
        f.gateway.complete(&ra, Some(user), None),
        f.gateway.complete(&rb, Some(user), None)
    );
    let refused = [&a, &b]
        .iter()
        .filter(|r| matches!(r, Err(GatewayError::Capacity(_))))
        .count();
    assert_eq!(refused, 1);
    assert_eq!(
        f.gateway.budgets().used(user).await.unwrap(),
        (2, 2),
        "only the answered call's 2 real tokens stay; the refused call's reservation is back"
    );
}

#[tokio::test]
async fn a_reservation_dropped_unsettled_releases_itself() {
    let f = fleet("", &[]).await;
    let user = UserId::new();
    let budget = hermes_config::TierBudget {
        daily_tokens: 1000,
        monthly_tokens: 10_000,
    };
    let held = f
        .gateway
        .budgets()
        .reserve(user, budget, 300)
        .await
        .unwrap();
    assert_eq!(held.tokens(), 300);
    assert_eq!(f.gateway.budgets().used(user).await.unwrap(), (300, 300));
    drop(held);
    budget_reaches(&f, user, (0, 0)).await;
}

#[tokio::test]
async fn a_call_cancelled_mid_flight_releases_its_reservation() {
    let f = fleet(
        "[llm.cache]\nenabled = false\n\
         [llm.budgets.free]\ndaily_tokens = 100000\nmonthly_tokens = 1000000\n",
        &[],
    )
    .await;
    on_openai(
        &f,
        openai_ok("never read", 1, 1).set_delay(Duration::from_secs(30)),
    )
    .await;
    let user = UserId::new();
    let gateway = f.gateway.clone();
    let call = tokio::spawn(async move { gateway.complete(&free("q"), Some(user), None).await });
    // The provider has the request, so the reservation is held.
    eventually("the call reaches the provider", || async {
        hits(&f.openai).await > 0
    })
    .await;
    assert_ne!(f.gateway.budgets().used(user).await.unwrap(), (0, 0));
    call.abort();
    assert!(call.await.is_err_and(|e| e.is_cancelled()));
    budget_reaches(&f, user, (0, 0)).await;
}

#[tokio::test]
async fn spend_is_counted_in_integer_micro_dollars_and_an_old_dollar_key_carries_over() {
    use redis::AsyncCommands;
    let f = fleet(
        "[llm.cache]\nenabled = false\n",
        &[("LLM_GLOBAL_DAILY_BUDGET_USD", "0.002")],
    )
    .await;
    let key = f.cache.key(format_args!(
        "llm:spend:{}",
        chrono::Utc::now().format("%Y-%m-%d")
    ));
    let mut redis = f.cache.conn();
    // What a build before the switch to integers left: dollars by INCRBYFLOAT.
    let () = redis.set(&key, "0.00105").await.unwrap();
    let status = f.gateway.budgets().status().await.unwrap();
    assert!((status.spent_today_usd - 0.00105).abs() < 1e-9);
    // 1000 × $0.15/M + 1500 × $0.60/M = 1,050 µ$, on top of the 1,050 µ$ already spent.
    on_openai(&f, openai_ok("pricey", 1000, 1500)).await;
    f.gateway.complete(&free("one"), None, None).await.unwrap();
    let stored: String = redis.get(&key).await.unwrap();
    assert_eq!(stored, "2100", "integer micro-dollars");
    let ttl: i64 = redis.ttl(&key).await.unwrap();
    assert!(ttl > 0, "the day's key still expires");
    let err = f
        .gateway
        .complete(&free("two"), None, None)
        .await
        .err()
        .unwrap();
    assert_eq!(
        err.code(),
        FailureCode::SpendingPaused,
        "over the $0.002 cap"
    );
    let status = f.gateway.budgets().status().await.unwrap();
    assert!((status.spent_today_usd - 0.0021).abs() < 1e-9);
}
