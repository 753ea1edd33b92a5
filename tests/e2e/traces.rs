//! Traces over OTLP (docs/tracing.md): the five services as separate processes export one
//! trace per Telegram message, received by the test kit's OTLP/HTTP collector and decoded
//! with the `opentelemetry-proto` crate; a caller's unsampled trace stays unsampled in every
//! process; and a collector that is unreachable costs no message.

use std::collections::HashMap;
use std::time::Duration;

use hermes_testkit::{
    OtlpReceiver, RealProcess, ReceivedSpan, TestEnv, eventually, free_port, metric, openai_fake,
    openai_tool_then_answer, telegram_fake, telegram_sent, telegram_text,
};
use hermes_types::model::Platform;
use serde_json::json;

const SECRET: &str = "tg-secret-0123456789";
const TOKEN: &str = "7000000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
const CHAT: i64 = 4242;
/// Offers the model its time tools (docs/tools-and-mcp.md), so the fake model's call runs.
const ASK: &str = "what time is it in Tokyo right now?";

/// Telegram at `api`, the model at `provider`, the chat's user with credits.
async fn telegram_env(api: &str, provider: &str) -> TestEnv {
    let mut env = TestEnv::new().await;
    env.openai_mock(&format!("{provider}/v1"))
        .set("HERMES_MODEL", "gpt-test")
        .set("TELEGRAM_WEBHOOK_SECRET", SECRET)
        .set("TELEGRAM_BOT_TOKEN", TOKEN)
        .set("TELEGRAM_API_BASE_URL", api)
        // Short batches, so spans arrive while the test waits for them.
        .set("OTEL_BSP_SCHEDULE_DELAY", "100");
    env.user(Platform::Telegram, &CHAT.to_string(), 50).await;
    env
}

/// POST one Telegram update to `ingest`.
async fn telegram_update(ingest: &RealProcess, update: &serde_json::Value) {
    traced_update(ingest, update, None).await;
}

/// POST one Telegram update to `ingest`, continuing the caller's `traceparent` when given.
async fn traced_update(
    ingest: &RealProcess,
    update: &serde_json::Value,
    traceparent: Option<&str>,
) {
    let mut req = reqwest::Client::new()
        .post(ingest.url("/webhooks/telegram"))
        .header("x-telegram-bot-api-secret-token", SECRET)
        .json(update);
    if let Some(tp) = traceparent {
        req = req.header("traceparent", tp);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
}

/// The consumer spans (kind 5) of `service` among `spans` that make the answer (memory
/// extraction, queued by delivery after the answer, is left out).
fn consumers<'a>(spans: &'a [ReceivedSpan], service: &str) -> Vec<&'a ReceivedSpan> {
    spans
        .iter()
        .filter(|s| s.kind == 5 && s.service == service)
        .filter(|s| s.attr("hermes.message.kind") != "MemoryExtract")
        .collect()
}

/// Whether `spans` hold every span of one answered message: the server span, a consumer span
/// per stage (the model's stage twice), a commit and a publish per stage, both model calls,
/// the tool call and the send.
fn complete(spans: &[ReceivedSpan]) -> bool {
    let count = |f: &dyn Fn(&ReceivedSpan) -> bool| spans.iter().filter(|s| f(s)).count();
    spans.iter().any(|s| s.kind == 2)
        && ["hermes-router", "hermes-tools", "hermes-delivery"]
            .iter()
            .all(|service| !consumers(spans, service).is_empty())
        && consumers(spans, "hermes-llm").len() >= 2
        && count(&|s| s.name == "COMMIT") >= 5
        && count(&|s| s.kind == 4) >= 5
        && count(&|s| {
            s.attr("gen_ai.operation.name") == "chat"
                && consumers(spans, "hermes-llm")
                    .iter()
                    .any(|c| c.span_id == s.parent_span_id)
        }) >= 2
        && count(&|s| s.attr("gen_ai.operation.name") == "execute_tool") >= 1
        && count(&|s| s.kind == 3 && s.service == "hermes-delivery") >= 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_telegram_message_with_a_tool_is_one_trace_across_five_processes() {
    let collector = OtlpReceiver::start().await;
    let provider =
        openai_tool_then_answer("current_time", &json!({"timezone": "Asia/Tokyo"}), "noon").await;
    let api = telegram_fake(TOKEN).await;
    let mut env = telegram_env(&api.uri(), &provider.uri()).await;
    env.set("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint())
        .set("HERMES_TRACE_LINK", "http://jaeger.test/trace/{trace_id}");
    let mut fleet = Vec::new();
    for service in ["router", "llm", "tools", "delivery", "ingest"] {
        fleet.push(env.spawn_ready(service).await);
    }
    let ingest = fleet.last().unwrap();
    telegram_update(ingest, &telegram_text(CHAT, 1, ASK)).await;

    // Each process exports on its own schedule: wait until every span the test reads arrived.
    let spans = eventually(Duration::from_secs(60), "the message's spans", || async {
        let spans = collector.spans();
        complete(&spans).then_some(spans)
    })
    .await;
    assert_eq!(telegram_sent(&api).await.len(), 1, "one answer sent");
    let by_id: HashMap<&str, &ReceivedSpan> =
        spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let parent_of = |s: &ReceivedSpan| by_id.get(s.parent_span_id.as_str()).copied();

    // The HTTP server span is the root, named by its route template.
    let server: Vec<_> = spans.iter().filter(|s| s.kind == 2).collect();
    assert_eq!(server.len(), 1, "one server span: {server:?}");
    let server = server[0];
    assert_eq!(server.service, "hermes-ingest");
    assert_eq!(server.name, "POST /webhooks/telegram");
    assert_eq!(server.attr("http.route"), "/webhooks/telegram");
    assert_eq!(server.attr("http.response.status_code"), 200);
    assert!(server.parent_span_id.is_empty(), "the root");
    let trace = &server.trace_id;
    // One trace: every span of the message is in it, and only the server span is a root.
    let consumer_spans: Vec<_> = spans
        .iter()
        .filter(|s| s.kind == 5 && s.attr("hermes.message.kind") != "MemoryExtract")
        .collect();
    assert_eq!(
        consumer_spans.len(),
        5,
        "router, llm twice, tools, delivery: {consumer_spans:?}"
    );
    for s in &spans {
        assert_eq!(
            &s.trace_id, trace,
            "{} of {} is in another trace",
            s.name, s.service
        );
        assert!(
            s.parent_span_id.is_empty() == std::ptr::eq(s, server),
            "{} is a second root",
            s.name
        );
    }

    // Each stage's consumer span hangs under the one before it, with its queue wait.
    let router = consumers(&spans, "hermes-router")[0];
    let llm = consumers(&spans, "hermes-llm");
    let tools = consumers(&spans, "hermes-tools")[0];
    let delivery = consumers(&spans, "hermes-delivery")[0];
    let (first, second) =
        if parent_of(llm[0]).map(|p| p.span_id.as_str()) == Some(router.span_id.as_str()) {
            (llm[0], llm[1])
        } else {
            (llm[1], llm[0])
        };
    for (child, parent) in [
        (router, server),
        (first, router),
        (tools, first),
        (second, tools),
        (delivery, second),
    ] {
        assert_eq!(
            child.parent_span_id, parent.span_id,
            "{} under {}",
            child.name, parent.name
        );
        assert_eq!(child.attr("messaging.system"), "rabbitmq");
        assert!(
            child.attr("hermes.queue.wait_ms").as_i64().is_some(),
            "{child:?}"
        );
        assert_eq!(child.attr("hermes.outcome"), "acked");
    }
    assert!(
        router.name.starts_with("process ") && router.name.ends_with(".router"),
        "{}",
        router.name
    );
    // Each commit is a child of its consumer span; each publish a producer span.
    let commits = spans.iter().filter(|s| s.name == "COMMIT").count();
    assert!(commits >= 5, "a commit per stage: {commits}");
    let commit = spans
        .iter()
        .find(|s| s.name == "COMMIT" && s.parent_span_id == router.span_id)
        .expect("the router's commit under its span");
    assert_eq!(commit.attr("db.system.name"), "postgresql");
    let producers: Vec<_> = spans.iter().filter(|s| s.kind == 4).collect();
    assert!(producers.len() >= 5, "{producers:?}");
    let publish = producers
        .iter()
        .find(|s| s.service == "hermes-ingest")
        .expect("ingest's publish");
    assert_eq!(publish.parent_span_id, server.span_id);
    assert_eq!(publish.attr("messaging.system"), "rabbitmq");
    assert!(publish.attr("messaging.message.id").is_string());

    // The model calls of the answer (memory extraction makes one more), by the GenAI
    // conventions, with their token counts.
    let chats: Vec<_> = spans
        .iter()
        .filter(|s| s.attr("gen_ai.operation.name") == "chat")
        .filter(|s| [&first.span_id, &second.span_id].contains(&&s.parent_span_id))
        .collect();
    assert_eq!(chats.len(), 2, "{chats:?}");
    for chat in &chats {
        assert_eq!(chat.kind, 3);
        assert_eq!(chat.attr("gen_ai.provider.name"), "openai");
        assert_eq!(
            chat.attr("gen_ai.request.model"),
            chat.attr("gen_ai.response.model")
        );
        assert!(
            chat.attr("gen_ai.usage.input_tokens").as_i64() > Some(0),
            "{chat:?}"
        );
        assert!(
            chat.attr("gen_ai.usage.output_tokens").as_i64() > Some(0),
            "{chat:?}"
        );
        assert_eq!(chat.attr("hermes.llm.failover_hop"), 0);
        assert_eq!(chat.attr("hermes.llm.cache_hit"), false);
        assert!(chat.name.starts_with("chat "), "{}", chat.name);
    }
    let reasons: Vec<_> = chats
        .iter()
        .map(|c| c.attr("gen_ai.response.finish_reasons").clone())
        .collect();
    assert!(reasons.contains(&json!(["tool_calls"])), "{reasons:?}");
    assert!(reasons.contains(&json!(["stop"])), "{reasons:?}");

    // The tool call and the send.
    let tool = spans
        .iter()
        .find(|s| s.attr("gen_ai.operation.name") == "execute_tool")
        .expect("the tool's span");
    assert_eq!(tool.name, "execute_tool current_time");
    assert_eq!(tool.attr("gen_ai.tool.name"), "current_time");
    assert_eq!(tool.attr("hermes.tool.outcome"), "ok");
    assert_eq!(parent_of(tool).unwrap().span_id, tools.span_id);
    let send = spans
        .iter()
        .find(|s| {
            s.kind == 3 && s.service == "hermes-delivery" && s.attr("http.request.method") == "POST"
        })
        .expect("the send's HTTP client span");
    assert_eq!(send.attr("http.response.status_code"), 200);
    assert_eq!(send.attr("server.address"), "127.0.0.1");
    assert_eq!(send.attr("http.request.resend_count"), 0);

    // Without HERMES_TRACE_CONTENT, no text, argument or chat id is in any attribute.
    for s in &spans {
        for (k, v) in &s.attributes {
            let v = v.to_string();
            assert!(
                !v.contains("Tokyo")
                    && !v.contains("noon")
                    && !names_chat(&v)
                    && !v.contains(TOKEN),
                "{k} of {} holds content: {v}",
                s.name
            );
        }
    }

    // `hermes runs show` names the trace and links to it.
    let run: String = env
        .db()
        .get()
        .await
        .unwrap()
        .query_one("SELECT id::text FROM agent_runs", &[])
        .await
        .unwrap()
        .get(0);
    let (code, out, err) = env.hermes(&["runs", "show", &run]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("trace {trace}  http://jaeger.test/trace/{trace}")),
        "{out}"
    );
    for process in &fleet {
        process.terminate();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_unsampled_trace_is_followed_by_every_process() {
    const DROPPED: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const KEPT: &str = "0af7651916cd43dd8448eb211c80319c";
    let collector = OtlpReceiver::start().await;
    let provider =
        openai_tool_then_answer("current_time", &json!({"timezone": "Asia/Tokyo"}), "noon").await;
    let api = telegram_fake(TOKEN).await;
    let mut env = telegram_env(&api.uri(), &provider.uri()).await;
    // The second message comes from another chat, whose history holds no tool round yet
    // (the fake model calls the tool until it sees one).
    const OTHER: i64 = 4343;
    env.user(Platform::Telegram, &OTHER.to_string(), 50).await;
    // Every trace is kept unless its caller says otherwise: only the flag decides below.
    env.set("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint())
        .set("OTEL_TRACES_SAMPLER", "parentbased_always_on");
    let mut fleet = Vec::new();
    for service in ["router", "llm", "tools", "delivery", "ingest"] {
        fleet.push(env.spawn_ready(service).await);
    }
    let ingest = fleet.last().unwrap();
    let dropped = format!("00-{DROPPED}-b7ad6b7169203331-00");
    traced_update(ingest, &telegram_text(CHAT, 1, ASK), Some(&dropped)).await;
    eventually(Duration::from_secs(60), "the first answer", || async {
        (!telegram_sent(&api).await.is_empty()).then_some(())
    })
    .await;

    // No stage made a span for the dropped message, yet each named one: every message a
    // stage sent continues the caller's trace, unsampled, under a span id of its own.
    let c = env.db().get().await.unwrap();
    let sent: Vec<String> = c
        .query(
            "SELECT traceparent FROM outbox WHERE traceparent LIKE $1 ORDER BY id",
            &[&format!("00-{DROPPED}-%")],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    // router → llm, llm → tools, tools → llm, llm → delivery.
    assert!(sent.len() >= 4, "{sent:?}");
    assert!(sent.iter().all(|tp| tp.ends_with("-00")), "{sent:?}");
    let ids: std::collections::HashSet<&str> = sent.iter().map(|tp| &tp[36..52]).collect();
    assert!(ids.len() >= 4, "a span id per stage's handling: {sent:?}");
    assert!(!ids.contains("b7ad6b7169203331"), "{sent:?}");

    // The second message starts after the first was answered: each process ends the first's
    // spans before it makes the second's, and exports them in that order, so once the
    // second's trace is whole, any span of the first would have arrived.
    let kept = format!("00-{KEPT}-00f067aa0ba902b7-01");
    traced_update(ingest, &telegram_text(OTHER, 2, ASK), Some(&kept)).await;
    eventually(Duration::from_secs(60), "the kept trace", || async {
        let spans: Vec<_> = collector
            .spans()
            .into_iter()
            .filter(|s| s.trace_id == KEPT)
            .collect();
        complete(&spans).then_some(())
    })
    .await;
    let leaked: Vec<_> = collector
        .spans()
        .into_iter()
        .filter(|s| s.trace_id != KEPT)
        .map(|s| format!("{} of {} in {}", s.name, s.service, s.trace_id))
        .collect();
    assert!(
        leaked.is_empty(),
        "spans outside the kept trace: {leaked:?}"
    );
    assert_eq!(telegram_sent(&api).await.len(), 2, "both answered");
    for process in &fleet {
        process.terminate();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_costs_no_message() {
    let provider = openai_fake("pong").await;
    let api = telegram_fake(TOKEN).await;
    let mut env = telegram_env(&api.uri(), &provider.uri()).await;
    // Nobody listens there; a small queue fills at once.
    env.set(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        &format!("http://127.0.0.1:{}", free_port()),
    )
    .set("OTEL_BSP_MAX_QUEUE_SIZE", "4");
    let all = env.spawn_ready("all").await;
    const MESSAGES: usize = 8;
    for n in 1..=MESSAGES {
        telegram_update(&all, &telegram_text(CHAT, n as i64, &format!("ping {n}"))).await;
    }
    eventually(
        Duration::from_secs(60),
        "every message answered",
        || async { (telegram_sent(&api).await.len() >= MESSAGES).then_some(()) },
    )
    .await;
    let metrics_url = format!("http://127.0.0.1:{}/metrics", all.admin);
    eventually(
        Duration::from_secs(30),
        "the dropped spans counted",
        || async {
            let text = reqwest::get(&metrics_url).await.ok()?.text().await.ok()?;
            let dropped = ["queue_full", "export_failed"]
                .iter()
                .filter_map(|r| {
                    metric(
                        &text,
                        &format!("hermes_trace_spans_dropped_total{{reason=\"{r}\"}}"),
                    )
                })
                .sum::<f64>();
            (dropped > 0.0).then_some(())
        },
    )
    .await;
    assert_eq!(
        telegram_sent(&api).await.len(),
        MESSAGES,
        "each answered once"
    );
    all.terminate();
}

/// Does `value` name the chat id: as a number of its own, not as digits inside another (a
/// duration of 30542425 ns is no chat id)?
fn names_chat(value: &str) -> bool {
    value
        .split(|c: char| !c.is_ascii_digit())
        .any(|digits| digits == CHAT.to_string())
}
