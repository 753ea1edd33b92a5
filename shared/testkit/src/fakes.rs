//! Messages as the fleet's own stages would publish them, and answers as a model provider
//! sends them.

use hermes_bus::Bus;
use hermes_types::envelope::Envelope;
use hermes_types::ids::RunId;

/// An inbound API message with one user turn, as ingest would publish it.
pub fn api_inbound(text: &str) -> hermes_types::model::Inbound {
    use hermes_types::model::{ChatMessage, Inbound, MessageEvent, Platform, Role};
    Inbound {
        conversation: vec![ChatMessage::text(Role::User, text)],
        ..Inbound::of(MessageEvent {
            platform: Platform::Api,
            sender_id: "api".into(),
            chat_id: "api".into(),
            text: Some(text.into()),
            media: Vec::new(),
            external_message_id: None,
            sender_name: None,
            received_at: chrono::Utc::now(),
            metadata: None,
        })
    }
}

/// A REST-channel message from `sender`, as ingest would publish it to the router.
pub fn rest_inbound(sender: &str, text: &str) -> hermes_types::model::Inbound {
    channel_inbound(hermes_types::model::Platform::Rest, sender, text)
}

/// A chat message from `sender` on `platform` (its chat is the sender's), as ingest would
/// publish it to the router.
pub fn channel_inbound(
    platform: hermes_types::model::Platform,
    sender: &str,
    text: &str,
) -> hermes_types::model::Inbound {
    use hermes_types::model::MessageEvent;
    let mut inbound = api_inbound(text);
    inbound.event = MessageEvent {
        platform,
        sender_id: sender.into(),
        chat_id: sender.into(),
        ..inbound.event
    };
    // Channels send one message; the router supplies the history.
    inbound.conversation = Vec::new();
    inbound
}

/// A Telegram update: user `chat` (Ada, in their private chat) sends `text` as message
/// `message_id`, which is also the update's id.
pub fn telegram_text(chat: i64, message_id: i64, text: &str) -> serde_json::Value {
    serde_json::json!({
        "update_id": message_id,
        "message": {
            "message_id": message_id,
            "from": {"id": chat, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": chat, "type": "private"},
            "date": 1_760_000_000,
            "text": text
        }
    })
}

/// The Bot API's `sendMessage` of bot `token` on a Telegram fake, before its answer: add
/// matchers (a chat, a text), then `respond_with` ([`telegram_ok`] or a failure) and mount.
pub fn telegram_send_message(token: &str) -> wiremock::MockBuilder {
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .and(wiremock::matchers::path(format!("/bot{token}/sendMessage")))
}

/// The Bot API's answer to a send it accepted.
pub fn telegram_ok() -> wiremock::ResponseTemplate {
    wiremock::ResponseTemplate::new(200).set_body_json(serde_json::json!({"ok": true}))
}

/// A fake Telegram Bot API answering every `sendMessage` of bot `token` with `ok`; pass
/// its `uri()` as `TELEGRAM_API_BASE_URL`.
pub async fn telegram_fake(token: &str) -> wiremock::MockServer {
    let server = wiremock::MockServer::start().await;
    telegram_send_message(token)
        .respond_with(telegram_ok())
        .mount(&server)
        .await;
    server
}

/// The bodies of every `sendMessage` a Telegram fake received, in order.
pub async fn telegram_sent(api: &wiremock::MockServer) -> Vec<serde_json::Value> {
    api.received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|r| r.url.path().ends_with("/sendMessage"))
        .filter_map(|r| serde_json::from_slice(&r.body).ok())
        .collect()
}

/// The texts a Telegram fake was asked to send to `chat`, in order.
pub async fn telegram_texts_to(api: &wiremock::MockServer, chat: &str) -> Vec<String> {
    telegram_sent(api)
        .await
        .into_iter()
        .filter(|b| b["chat_id"] == chat)
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect()
}

/// A chat completions answer as an OpenAI-compatible provider sends it.
pub fn openai_answer(text: &str, prompt_tokens: u64, completion_tokens: u64) -> serde_json::Value {
    serde_json::json!({
        "id": "chatcmpl-test", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens}
    })
}

/// `answer` (a chat completion, as [`openai_answer`] or [`openai_tool_call`] make) the way the
/// request whose body is `request` asked for it: as one JSON body, or with `"stream": true` as
/// server-sent chunks (the message's content and tool calls, then the finish reason with the
/// usage, then `[DONE]`), as an OpenAI-compatible provider streams it.
pub fn openai_reply(
    request: &serde_json::Value,
    answer: serde_json::Value,
) -> wiremock::ResponseTemplate {
    use serde_json::json;
    if request["stream"] != true {
        return wiremock::ResponseTemplate::new(200).set_body_json(answer);
    }
    let choice = &answer["choices"][0];
    let message = &choice["message"];
    let mut delta = json!({"role": "assistant"});
    if let Some(text) = message["content"].as_str() {
        delta["content"] = json!(text);
    }
    if let Some(calls) = message["tool_calls"].as_array() {
        let indexed: Vec<serde_json::Value> = calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut c = c.clone();
                c["index"] = json!(i);
                c
            })
            .collect();
        delta["tool_calls"] = json!(indexed);
    }
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        json!({"id": answer["id"], "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut last = chunk(json!({}), choice["finish_reason"].clone());
    last["usage"] = answer["usage"].clone();
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(delta, serde_json::Value::Null),
        last
    );
    wiremock::ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body)
}

/// An OpenAI-compatible fake model answering every call with `text` (1 token in, 1 out);
/// pass its `uri()` to [`crate::TestEnv::openai_mock`].
pub async fn openai_fake(text: &str) -> wiremock::MockServer {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(openai_answer(text, 1, 1)))
        .mount(&server)
        .await;
    server
}

/// A chat completions answer that asks for one tool call (`call_1`), with 30/9 tokens.
pub fn openai_tool_call(tool: &str, arguments: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "id": "c1", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": tool, "arguments": arguments.to_string()}}
        ]}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}
    })
}

/// An OpenAI-compatible fake model that asks for `tool` with `arguments` (see
/// [`openai_tool_call`]) and answers `answer` once a request carries a tool result.
pub async fn openai_tool_then_answer(
    tool: &str,
    arguments: &serde_json::Value,
    answer: &str,
) -> wiremock::MockServer {
    use wiremock::matchers::{body_string_contains, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let provider = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_string_contains("\"role\":\"tool\""))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_answer(answer, 40, 3)))
        .with_priority(1)
        .mount(&provider)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(openai_tool_call(tool, arguments)))
        .with_priority(2)
        .mount(&provider)
        .await;
    provider
}

/// The last tool turn of a chat completions request to the fake model (its content parsed
/// as JSON when it is JSON), if it has one.
pub fn tool_result(request: &serde_json::Value) -> Option<serde_json::Value> {
    let tool = request["messages"]
        .as_array()?
        .iter()
        .rfind(|m| m["role"] == "tool")?;
    let content = &tool["content"];
    Some(
        content
            .as_str()
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_else(|| content.clone()),
    )
}

/// Take every message waiting in `stage`'s queue (acking them), decoded.
pub async fn drain(bus: &Bus, stage: hermes_bus::Stage) -> Vec<Envelope> {
    use lapin::options::{BasicAckOptions, BasicGetOptions};
    let ch = bus.channel().await.expect("channel");
    let mut out = Vec::new();
    while let Some(m) = ch
        .basic_get(bus.names().queue(stage).into(), BasicGetOptions::default())
        .await
        .expect("basic.get")
    {
        out.push(Envelope::from_slice(&m.delivery.data).expect("envelope"));
        m.delivery
            .acker
            .ack(BasicAckOptions::default())
            .await
            .expect("ack");
    }
    out
}

/// Publish a REST-channel message from `sender` to the router's queue, as ingest would.
pub async fn send(bus: &Bus, sender: &str, text: &str) -> RunId {
    send_on(bus, hermes_types::model::Platform::Rest, sender, text).await
}

/// Publish a chat message from `sender` on `platform` to the router's queue, as ingest
/// would (see [`channel_inbound`]).
pub async fn send_on(
    bus: &Bus,
    platform: hermes_types::model::Platform,
    sender: &str,
    text: &str,
) -> RunId {
    let run = RunId::new();
    bus.publish(&Envelope::new(
        run,
        None,
        &channel_inbound(platform, sender, text),
    ))
    .await
    .expect("the router's queue takes the message");
    run
}

/// The value of the series `series` (name and labels, as exported) in a Prometheus text
/// exposition, if it is there.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        line.strip_prefix(series)
            .filter(|rest| rest.starts_with(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}
