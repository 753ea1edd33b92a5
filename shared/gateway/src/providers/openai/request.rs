//! A neutral call as the body of an OpenAI-compatible `/chat/completions` request: roles,
//! tool calls with their arguments as JSON strings, tools, sampling parameters, the
//! structured-output format and the usage option of a stream.

use hermes_types::model::{ChatMessage, Role};
use hermes_types::openai_wire::encode_tool_call;
use serde_json::{Value, json};

use super::presets::{Quirks, StreamUsage};
use crate::providers::CallSpec;

fn role(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn wire_message(m: &ChatMessage) -> Value {
    let mut v = json!({ "role": role(m.role), "content": m.content });
    if !m.images.is_empty() {
        // Images go as content parts: the text first, then one image_url part per image.
        let mut parts: Vec<Value> = m
            .content
            .iter()
            .map(|t| json!({ "type": "text", "text": t }))
            .collect();
        parts.extend(
            m.images
                .iter()
                .map(|i| json!({ "type": "image_url", "image_url": { "url": i.url } })),
        );
        v["content"] = Value::Array(parts);
    }
    if !m.tool_calls.is_empty() {
        v["tool_calls"] = m.tool_calls.iter().map(encode_tool_call).collect();
    }
    if let Some(id) = &m.tool_call_id {
        v["tool_call_id"] = json!(id);
    }
    v
}

/// The JSON body of a chat completions request. Stacked system blocks stay separate
/// `system` messages, in order; a stream asks for its usage unless the backend refuses the
/// option (and sends it anyway).
pub fn request_body(call: &CallSpec<'_>, stream: bool, quirks: Quirks) -> Value {
    let mut body = json!({
        "model": call.model_id,
        "messages": call.messages.iter().map(wire_message).collect::<Vec<_>>(),
        "max_tokens": call.max_tokens,
    });
    if !call.tools.is_empty() {
        body["tools"] = call
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": { "name": t.name, "description": t.description, "parameters": t.parameters }
                })
            })
            .collect();
    }
    let p = call.params;
    if let Some(t) = p.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(t) = p.top_p {
        body["top_p"] = json!(t);
    }
    if !p.stop.is_empty() {
        body["stop"] = json!(p.stop);
    }
    if let Some(f) = &p.response_format {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": { "name": f.name, "schema": f.schema, "strict": f.strict },
        });
    }
    if stream {
        body["stream"] = json!(true);
        if quirks.stream_usage == StreamUsage::Requested {
            body["stream_options"] = json!({ "include_usage": true });
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::testing::call;
    use hermes_types::model::{CallParams, ToolSpec};

    use hermes_types::model::{ChatMessage, Role, ToolCall};
    use serde_json::json;

    #[test]
    fn request_carries_tools_and_tool_results() {
        let messages = vec![
            ChatMessage::text(Role::User, "time?"),
            ChatMessage {
                role: Role::Assistant,
                content: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "current_time".into(),
                    arguments: json!({}),
                    signature: None,
                }],
                tool_call_id: None,
                images: Vec::new(),
            },
            ChatMessage::tool_result("c1", "12:00"),
        ];
        let tools = vec![ToolSpec {
            name: "current_time".into(),
            description: "d".into(),
            parameters: json!({"type":"object"}),
            toolset: "builtin".into(),
        }];
        let params = CallParams::default();
        let mut spec = call("gpt", &messages, &tools, &params);
        spec.max_tokens = 5;
        let body = request_body(&spec, false, Quirks::default());
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(body["messages"][2]["tool_call_id"], "c1");
        assert_eq!(body["tools"][0]["function"]["name"], "current_time");
        assert_eq!(body["max_tokens"], 5);
    }

    #[test]
    fn params_response_format_and_stream_options_reach_the_body() {
        let messages = vec![
            ChatMessage::text(Role::System, "persona"),
            ChatMessage::text(Role::System, "memory"),
            ChatMessage::text(Role::User, "hi"),
        ];
        let params = CallParams {
            temperature: Some(0.2),
            top_p: Some(0.9),
            stop: vec!["END".into()],
            max_tokens: None,
            response_format: Some(hermes_types::model::JsonSchemaFormat {
                name: "answer".into(),
                schema: json!({"type": "object"}),
                strict: true,
            }),
        };
        let body = request_body(&call("m", &messages, &[], &params), true, Quirks::default());
        assert_eq!(body["messages"][0]["content"], "persona");
        assert_eq!(body["messages"][1]["role"], "system");
        assert_eq!(body["messages"][1]["content"], "memory");
        assert_eq!(body["temperature"], json!(0.2f32));
        assert_eq!(body["top_p"], json!(0.9f32));
        assert_eq!(body["stop"], json!(["END"]));
        assert_eq!(body["response_format"]["type"], "json_schema");
        assert_eq!(body["response_format"]["json_schema"]["name"], "answer");
        assert_eq!(body["response_format"]["json_schema"]["strict"], true);
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert!(body.get("tools").is_none(), "no tool fields without tools");
    }
}
