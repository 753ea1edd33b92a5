//! A neutral call as the body of a Gemini `generateContent` request: system instruction,
//! alternating `user`/`model` contents, images inline or by URI, tool results matched to
//! their calls by name, function declarations and the generation config.

use hermes_types::model::{ChatMessage, ImageRef, Role};
use serde_json::{Value, json};

use super::schema::{clean_schema, tool_parameters};
use crate::providers::CallSpec;

/// Gemini refuses more than five stop sequences with a 400.
const MAX_STOP_SEQUENCES: usize = 5;

/// The JSON body of a `generateContent` request (the streaming call sends the same body).
///
/// System messages become `systemInstruction` parts in order; the rest become `contents`,
/// with consecutive turns of the same Gemini role merged, because Gemini expects user and
/// model turns to alternate.
pub fn request_body(call: &CallSpec<'_>) -> Value {
    let mut system_parts: Vec<Value> = Vec::new();
    let mut contents: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for (i, m) in call.messages.iter().enumerate() {
        let (role, parts) = match m.role {
            Role::System => {
                if let Some(text) = m.content.as_deref().filter(|t| !t.trim().is_empty()) {
                    system_parts.push(json!({ "text": text }));
                }
                continue;
            }
            Role::User => ("user", user_parts(m)),
            Role::Assistant => ("model", model_parts(m)),
            // Function results go back in a user turn.
            Role::Tool => ("user", vec![tool_result_part(m, &call.messages[..i])]),
        };
        // Gemini refuses a content without parts.
        if parts.is_empty() {
            continue;
        }
        match contents.last_mut() {
            Some((last, acc)) if *last == role => acc.extend(parts),
            _ => contents.push((role, parts)),
        }
    }

    let mut body = json!({
        "contents": contents
            .into_iter()
            .map(|(role, parts)| json!({ "role": role, "parts": parts }))
            .collect::<Vec<_>>(),
    });
    if !system_parts.is_empty() {
        body["systemInstruction"] = json!({ "parts": system_parts });
    }
    if !call.tools.is_empty() {
        let declarations: Vec<Value> = call
            .tools
            .iter()
            .map(|t| {
                let mut d = json!({ "name": t.name, "description": t.description });
                if let Some(p) = tool_parameters(&t.parameters) {
                    d["parameters"] = p;
                }
                d
            })
            .collect();
        body["tools"] = json!([{ "functionDeclarations": declarations }]);
    }
    body["generationConfig"] = generation_config(call);
    body
}

fn generation_config(call: &CallSpec<'_>) -> Value {
    let p = call.params;
    let mut config = json!({ "maxOutputTokens": call.max_tokens });
    if let Some(t) = p.temperature {
        config["temperature"] = json!(t);
    }
    if let Some(t) = p.top_p {
        config["topP"] = json!(t);
    }
    if !p.stop.is_empty() {
        // Beyond the fifth Gemini would refuse the whole call; the first five still apply.
        let stop: Vec<&String> = p.stop.iter().take(MAX_STOP_SEQUENCES).collect();
        config["stopSequences"] = json!(stop);
    }
    if let Some(f) = &p.response_format {
        config["responseMimeType"] = json!("application/json");
        config["responseSchema"] = clean_schema(&f.schema);
    }
    config
}

/// A user turn's parts: its text, then its images.
fn user_parts(m: &ChatMessage) -> Vec<Value> {
    let mut parts: Vec<Value> = text_part(m).into_iter().collect();
    parts.extend(m.images.iter().map(image_part));
    parts
}

/// A model turn's parts: its text, then one `functionCall` part per tool call, each with
/// the thought signature it came with (Gemini validates it on the next turn).
fn model_parts(m: &ChatMessage) -> Vec<Value> {
    let mut parts: Vec<Value> = text_part(m).into_iter().collect();
    parts.extend(m.tool_calls.iter().map(|c| {
        let mut part = json!({ "functionCall": { "name": c.name, "args": c.arguments } });
        if let Some(sig) = &c.signature {
            part["thoughtSignature"] = json!(sig);
        }
        part
    }));
    parts
}

fn text_part(m: &ChatMessage) -> Option<Value> {
    m.content
        .as_deref()
        .filter(|t| !t.is_empty())
        .map(|t| json!({ "text": t }))
}

/// A `data:` URL travels inline; any other URL is handed to Gemini to fetch.
fn image_part(image: &ImageRef) -> Value {
    if let Some((mime, data)) = parse_data_url(&image.url) {
        let mime = mime.or(image.mime_type.as_deref()).unwrap_or("image/jpeg");
        return json!({ "inlineData": { "mimeType": mime, "data": data } });
    }
    json!({
        "fileData": {
            "mimeType": image.mime_type.as_deref().unwrap_or("image/jpeg"),
            "fileUri": image.url,
        }
    })
}

/// `data:<mime>;base64,<data>` → (mime if given, data). Only base64 data URLs qualify:
/// `inlineData` takes base64 bytes.
fn parse_data_url(url: &str) -> Option<(Option<&str>, &str)> {
    hermes_types::data_url::parse_base64(url).map(|d| (d.mime, d.data))
}

/// A tool result as a `functionResponse` part. Gemini matches results by function name,
/// which only the assistant turn that made the call knows; the nearest earlier call with
/// this id wins (ids may repeat across turns on other backends).
fn tool_result_part(m: &ChatMessage, earlier: &[ChatMessage]) -> Value {
    let text = m.content.as_deref().unwrap_or_default();
    let id = m.tool_call_id.as_deref().unwrap_or_default();
    let name = earlier
        .iter()
        .rev()
        .filter(|e| e.role == Role::Assistant)
        .flat_map(|e| e.tool_calls.iter())
        .find(|c| c.id == id)
        .map(|c| c.name.as_str());
    let Some(name) = name else {
        // A result whose call is gone (a trimmed history) would make Gemini refuse the
        // whole request ("function response turn must follow a function call turn"); as
        // plain text the model still sees it.
        return json!({ "text": format!("Result of tool call {id}: {text}") });
    };
    let content = match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!(text),
    };
    json!({ "functionResponse": { "name": name, "response": { "content": content } } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::gemini::test_support::*;
    use crate::providers::testing::call;
    use hermes_types::model::{CallParams, JsonSchemaFormat, ToolSpec};
    use hermes_types::model::{ChatMessage, ImageRef, Role};
    use serde_json::json;

    #[test]
    fn request_body_maps_every_field() {
        let messages = vec![
            ChatMessage::text(Role::System, "You are the venue assistant."),
            ChatMessage::text(Role::System, "  \n"),
            ChatMessage::text(Role::System, "Opening hours: 10-18."),
            ChatMessage {
                images: vec![
                    ImageRef {
                        url: "data:image/png;base64,iVBORw0KGgo=".into(),
                        mime_type: None,
                    },
                    ImageRef {
                        url: "https://cdn.example/menu.webp".into(),
                        mime_type: Some("image/webp".into()),
                    },
                    ImageRef {
                        url: "https://cdn.example/photo".into(),
                        mime_type: None,
                    },
                ],
                ..ChatMessage::text(Role::User, "What is on these?")
            },
            ChatMessage::text(Role::User, "And what time is it in Tokyo?"),
            ChatMessage {
                role: Role::Assistant,
                content: Some("Checking.".into()),
                tool_calls: vec![
                    signed_call(
                        "c1",
                        "current_time",
                        json!({"timezone": "Asia/Tokyo"}),
                        Some("SIG/1+="),
                    ),
                    signed_call("c2", "weather", json!({"city": "Tokyo"}), None),
                ],
                tool_call_id: None,
                images: Vec::new(),
            },
            ChatMessage::tool_result("c2", r#"{"temp_c": 21}"#),
            ChatMessage::tool_result("c1", "12:00"),
            ChatMessage::tool_result("gone", "orphan"),
            ChatMessage::text(Role::User, "Thanks!"),
        ];
        let tools = vec![ToolSpec {
            name: "current_time".into(),
            description: "The current time in a timezone.".into(),
            parameters: json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "timezone": {"type": "string", "format": "iana-tz", "description": "IANA name"},
                    "options": {
                        "type": "object",
                        "additionalProperties": false,
                        "properties": {"seconds": {"type": ["boolean", "null"]}}
                    }
                },
                "required": ["timezone"]
            }),
            toolset: "builtin".into(),
        }];
        let params = CallParams {
            temperature: Some(0.5),
            top_p: Some(0.25),
            stop: vec!["END".into()],
            max_tokens: None,
            response_format: Some(JsonSchemaFormat {
                name: "answer".into(),
                schema: json!({
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "properties": {"reply": {"type": "string"}},
                    "required": ["reply"],
                    "additionalProperties": false
                }),
                strict: true,
            }),
        };
        let mut spec = call(MODEL, &messages, &tools, &params);
        spec.max_tokens = 77;
        let body = request_body(&spec);

        assert_eq!(
            body["systemInstruction"],
            json!({"parts": [
                {"text": "You are the venue assistant."},
                {"text": "Opening hours: 10-18."}
            ]})
        );
        let contents = body["contents"].as_array().unwrap();
        assert_eq!(contents.len(), 3, "{contents:#?}");
        // The two user messages merge into one turn: text, images, text.
        assert_eq!(
            contents[0],
            json!({"role": "user", "parts": [
                {"text": "What is on these?"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"fileData": {"mimeType": "image/webp", "fileUri": "https://cdn.example/menu.webp"}},
                {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://cdn.example/photo"}},
                {"text": "And what time is it in Tokyo?"}
            ]})
        );
        assert_eq!(
            contents[1],
            json!({"role": "model", "parts": [
                {"text": "Checking."},
                {"functionCall": {"name": "current_time", "args": {"timezone": "Asia/Tokyo"}},
                 "thoughtSignature": "SIG/1+="},
                {"functionCall": {"name": "weather", "args": {"city": "Tokyo"}}}
            ]})
        );
        // Results grouped in one user turn, named after their calls, followed by the
        // next user message; a JSON object result travels parsed, text as a string.
        assert_eq!(
            contents[2],
            json!({"role": "user", "parts": [
                {"functionResponse": {"name": "weather", "response": {"content": {"temp_c": 21}}}},
                {"functionResponse": {"name": "current_time", "response": {"content": "12:00"}}},
                {"text": "Result of tool call gone: orphan"},
                {"text": "Thanks!"}
            ]})
        );
        assert_eq!(
            body["tools"],
            json!([{"functionDeclarations": [{
                "name": "current_time",
                "description": "The current time in a timezone.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "timezone": {"type": "string", "description": "IANA name"},
                        "options": {
                            "type": "object",
                            "properties": {"seconds": {"type": "boolean", "nullable": true}}
                        }
                    },
                    "required": ["timezone"]
                }
            }]}])
        );
        assert_eq!(
            body["generationConfig"],
            json!({
                "maxOutputTokens": 77,
                "temperature": 0.5,
                "topP": 0.25,
                "stopSequences": ["END"],
                "responseMimeType": "application/json",
                "responseSchema": {
                    "type": "object",
                    "properties": {"reply": {"type": "string"}},
                    "required": ["reply"]
                }
            })
        );
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(
            keys.len(),
            4,
            "contents, systemInstruction, tools, generationConfig: {keys:?}"
        );
    }

    #[test]
    fn minimal_request_has_no_optional_fields() {
        let messages = user("hi");
        let params = CallParams::default();
        let body = request_body(&call(MODEL, &messages, &[], &params));
        assert_eq!(
            body,
            json!({
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "generationConfig": {"maxOutputTokens": 256}
            })
        );
    }
}
