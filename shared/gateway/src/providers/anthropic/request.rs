//! A neutral call as the body of an Anthropic Messages request: system blocks, strictly
//! alternating turns with tool results leading the next user turn, image blocks, tools,
//! sampling parameters and the structured-output format.

use hermes_types::model::{ChatMessage, ImageRef, Role, ToolCall};
use serde_json::{Value, json};

use crate::providers::CallSpec;

/// One wire turn being assembled; consecutive same-role messages land in the same turn.
struct Turn {
    role: &'static str,
    blocks: Vec<Value>,
}

/// Append `blocks` as a `role` turn, merging into the previous turn when it has the same
/// role: Anthropic refuses two consecutive turns of one role.
fn push_blocks(turns: &mut Vec<Turn>, role: &'static str, blocks: Vec<Value>) {
    if blocks.is_empty() {
        // An empty content array is refused; a message with nothing to say is dropped.
        return;
    }
    match turns.last_mut() {
        Some(t) if t.role == role => t.blocks.extend(blocks),
        _ => turns.push(Turn { role, blocks }),
    }
}

/// Add a `tool_result` block to the user turn after the tool call, behind any results
/// already there but ahead of any text: Anthropic wants the results first in that turn.
fn push_tool_result(turns: &mut Vec<Turn>, block: Value) {
    match turns.last_mut() {
        Some(t) if t.role == "user" => {
            let at = t
                .blocks
                .iter()
                .take_while(|b| b["type"] == "tool_result")
                .count();
            t.blocks.insert(at, block);
        }
        _ => turns.push(Turn {
            role: "user",
            blocks: vec![block],
        }),
    }
}

/// A text block, or none for missing or blank text (Anthropic refuses empty text blocks).
fn text_block(content: Option<&str>) -> Option<Value> {
    content
        .filter(|t| !t.trim().is_empty())
        .map(|t| json!({ "type": "text", "text": t }))
}

/// An image block: inline base64 for a `data:` URL (Anthropic does not fetch those), a
/// URL source otherwise.
fn image_block(img: &ImageRef) -> Value {
    if let Some((media_type, data)) = parse_data_url(&img.url) {
        let media_type = media_type
            .or_else(|| img.mime_type.clone())
            .unwrap_or_else(|| sniff_image_type(data).to_string());
        return json!({
            "type": "image",
            "source": { "type": "base64", "media_type": media_type, "data": data },
        });
    }
    json!({ "type": "image", "source": { "type": "url", "url": img.url } })
}

/// The media type (if the URL names one) and base64 payload of a `data:…;base64,…` URL;
/// `None` for other URLs, including non-base64 data URLs.
fn parse_data_url(url: &str) -> Option<(Option<String>, &str)> {
    hermes_types::data_url::parse_base64(url).map(|d| (d.mime.map(str::to_owned), d.data))
}

/// The image type of a base64 payload by its magic bytes, for data URLs that name none
/// (Anthropic requires `media_type`); PNG when unrecognised.
fn sniff_image_type(data: &str) -> &'static str {
    if data.starts_with("/9j/") {
        "image/jpeg"
    } else if data.starts_with("R0lGOD") {
        "image/gif"
    } else if data.starts_with("UklGR") {
        "image/webp"
    } else {
        "image/png"
    }
}

/// A `tool_use` block for a call the assistant made earlier.
fn tool_use_block(c: &ToolCall) -> Value {
    // `input` must be an object; a call without arguments is stored as null.
    let input = if c.arguments.is_null() {
        json!({})
    } else {
        c.arguments.clone()
    };
    json!({ "type": "tool_use", "id": c.id, "name": c.name, "input": input })
}

/// The `system` blocks and the alternating turns of a conversation.
fn wire_conversation(messages: &[ChatMessage]) -> (Vec<Value>, Vec<Turn>) {
    let mut system = Vec::new();
    let mut turns: Vec<Turn> = Vec::new();
    for m in messages {
        match m.role {
            Role::System => system.extend(text_block(m.content.as_deref())),
            Role::User => {
                // Images before the text, as Anthropic recommends for vision prompts.
                let mut blocks: Vec<Value> = m.images.iter().map(image_block).collect();
                blocks.extend(text_block(m.content.as_deref()));
                push_blocks(&mut turns, "user", blocks);
            }
            Role::Assistant => {
                let mut blocks: Vec<Value> = text_block(m.content.as_deref()).into_iter().collect();
                blocks.extend(m.tool_calls.iter().map(tool_use_block));
                push_blocks(&mut turns, "assistant", blocks);
            }
            Role::Tool => match &m.tool_call_id {
                Some(id) => {
                    let mut block = json!({ "type": "tool_result", "tool_use_id": id });
                    // `content` is optional; an empty string is left out rather than sent.
                    if let Some(c) = m.content.as_deref().filter(|c| !c.is_empty()) {
                        block["content"] = json!(c);
                    }
                    push_tool_result(&mut turns, block);
                }
                // A result that names no call cannot be a tool_result; the model still
                // gets to read it as user text.
                None => push_blocks(
                    &mut turns,
                    "user",
                    text_block(m.content.as_deref()).into_iter().collect(),
                ),
            },
        }
    }
    (system, turns)
}

/// The JSON body of a Messages request.
pub fn request_body(call: &CallSpec<'_>, stream: bool) -> Value {
    let (system, turns) = wire_conversation(call.messages);
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|t| json!({ "role": t.role, "content": t.blocks }))
        .collect();
    let mut body = json!({
        "model": call.model_id,
        "max_tokens": call.max_tokens,
        "messages": messages,
    });
    if !system.is_empty() {
        body["system"] = Value::Array(system);
    }
    if !call.tools.is_empty() {
        body["tools"] = call
            .tools
            .iter()
            .map(|t| {
                json!({ "name": t.name, "description": t.description, "input_schema": t.parameters })
            })
            .collect();
    }
    let p = call.params;
    if let Some(t) = p.temperature {
        // Callers speak OpenAI's 0–2 range; Anthropic refuses anything above 1, and an
        // invalid request would not fail over, so the nearest value it takes is sent.
        body["temperature"] = json!(t.clamp(0.0, 1.0));
    }
    if let Some(t) = p.top_p {
        body["top_p"] = json!(t);
    }
    if !p.stop.is_empty() {
        body["stop_sequences"] = json!(p.stop);
    }
    if let Some(f) = &p.response_format {
        // Anthropic's structured outputs: constrained decoding against the schema, enabled
        // by the `structured-outputs-2025-11-13` beta header that `post` adds alongside.
        // Chosen over the older "force a single tool call" trick because the answer then
        // arrives as ordinary text, exactly as the OpenAI-compatible backends return it.
        // OpenAI's `name` and `strict` have no counterpart (the output is always strict).
        body["output_format"] = json!({ "type": "json_schema", "schema": f.schema });
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::anthropic::test_support::*;
    use crate::providers::testing::call;
    use hermes_types::model::{CallParams, JsonSchemaFormat};
    use hermes_types::model::{ChatMessage, ImageRef, Role};
    use serde_json::{Value, json};

    #[test]
    fn system_messages_become_ordered_blocks_and_blank_ones_are_skipped() {
        let messages = vec![
            msg(Role::System, "You are Hermes."),
            msg(Role::System, "   "),
            msg(Role::User, "hi"),
            msg(Role::System, "Answer in French."),
        ];
        let params = CallParams::default();
        let body = request_body(&call("claude", &messages, &[], &params), false);
        assert_eq!(
            body["system"],
            json!([
                { "type": "text", "text": "You are Hermes." },
                { "type": "text", "text": "Answer in French." },
            ])
        );
        assert_eq!(
            body["messages"],
            json!([{ "role": "user", "content": [{ "type": "text", "text": "hi" }] }])
        );

        let plain = vec![msg(Role::User, "hi")];
        let body = request_body(&call("claude", &plain, &[], &params), false);
        assert!(body.get("system").is_none(), "{body}");
    }

    #[test]
    fn turns_alternate_with_tool_results_first_in_the_next_user_turn() {
        let messages = vec![
            msg(Role::User, "weather in Paris and Rome?"),
            msg(Role::User, "in celsius please"),
            assistant_calls(
                Some("Let me check both."),
                &[
                    ("toolu_01A", "get_weather", json!({ "location": "Paris" })),
                    ("toolu_01B", "get_weather", Value::Null),
                ],
            ),
            // A user message that slipped in between the call and its results.
            msg(Role::User, "thanks!"),
            ChatMessage::tool_result("toolu_01A", "18°C"),
            ChatMessage::tool_result("toolu_01B", "21°C"),
            msg(Role::Assistant, "Paris 18°C, Rome 21°C."),
            msg(Role::Assistant, "Anything else?"),
        ];
        let params = CallParams::default();
        let body = request_body(&call("claude", &messages, &[], &params), false);
        assert_eq!(
            body["messages"],
            json!([
                { "role": "user", "content": [
                    { "type": "text", "text": "weather in Paris and Rome?" },
                    { "type": "text", "text": "in celsius please" },
                ]},
                { "role": "assistant", "content": [
                    { "type": "text", "text": "Let me check both." },
                    { "type": "tool_use", "id": "toolu_01A", "name": "get_weather",
                      "input": { "location": "Paris" } },
                    { "type": "tool_use", "id": "toolu_01B", "name": "get_weather", "input": {} },
                ]},
                { "role": "user", "content": [
                    { "type": "tool_result", "tool_use_id": "toolu_01A", "content": "18°C" },
                    { "type": "tool_result", "tool_use_id": "toolu_01B", "content": "21°C" },
                    { "type": "text", "text": "thanks!" },
                ]},
                { "role": "assistant", "content": [
                    { "type": "text", "text": "Paris 18°C, Rome 21°C." },
                    { "type": "text", "text": "Anything else?" },
                ]},
            ])
        );
    }

    #[test]
    fn images_become_base64_or_url_blocks_ahead_of_the_text() {
        let mut user = msg(Role::User, "What is in these images?");
        user.images = vec![
            ImageRef {
                url: "data:image/jpeg;base64,/9j/4AAQSkZJRg==".into(),
                mime_type: None,
            },
            ImageRef {
                url: "https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg".into(),
                mime_type: Some("image/jpeg".into()),
            },
            // A data URL naming no type: the payload's magic bytes tell it.
            ImageRef {
                url: "data:;base64,iVBORw0KGgo=".into(),
                mime_type: None,
            },
        ];
        let messages = vec![user];
        let params = CallParams::default();
        let body = request_body(&call("claude", &messages, &[], &params), false);
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                { "type": "image", "source": {
                    "type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQSkZJRg==" } },
                { "type": "image", "source": {
                    "type": "url",
                    "url": "https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg" } },
                { "type": "image", "source": {
                    "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo=" } },
                { "type": "text", "text": "What is in these images?" },
            ])
        );
    }

    #[test]
    fn tools_params_and_output_format_are_sent() {
        let messages = vec![msg(Role::User, "weather?")];
        let tools = vec![weather_tool()];
        let schema = json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"],
            "additionalProperties": false,
        });
        let params = CallParams {
            temperature: Some(0.3),
            top_p: Some(0.9),
            stop: vec!["\n\nHuman:".into(), "END".into()],
            max_tokens: Some(100),
            response_format: Some(JsonSchemaFormat {
                name: "city".into(),
                schema: schema.clone(),
                strict: true,
            }),
        };
        let mut spec = call("claude-haiku-4-5-20251001", &messages, &tools, &params);
        spec.max_tokens = 100;
        let body = request_body(&spec, true);
        assert_eq!(body["model"], "claude-haiku-4-5-20251001");
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(
            body["tools"],
            json!([{
                "name": "get_weather",
                "description": "Get the current weather in a given location",
                "input_schema": tools[0].parameters,
            }])
        );
        assert_eq!(body["temperature"].as_f64().unwrap() as f32, 0.3);
        assert_eq!(body["top_p"].as_f64().unwrap() as f32, 0.9);
        assert_eq!(body["stop_sequences"], json!(["\n\nHuman:", "END"]));
        assert_eq!(
            body["output_format"],
            json!({ "type": "json_schema", "schema": schema })
        );
        assert_eq!(body["stream"], true);
        assert!(body.get("stop").is_none() && body.get("response_format").is_none());

        // Nothing optional is sent when nothing is asked for; max_tokens always is.
        let params = CallParams {
            temperature: Some(1.7),
            ..CallParams::default()
        };
        let body = request_body(&call("claude", &messages, &[], &params), false);
        for absent in [
            "tools",
            "top_p",
            "stop_sequences",
            "output_format",
            "stream",
            "system",
        ] {
            assert!(body.get(absent).is_none(), "{absent} in {body}");
        }
        assert_eq!(body["max_tokens"], 256);
        // OpenAI's range goes to 2, Anthropic's stops at 1.
        assert_eq!(body["temperature"], 1.0);
    }
}
