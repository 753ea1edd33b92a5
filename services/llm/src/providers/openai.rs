//! OpenAI-compatible chat completions (OpenAI, OpenRouter, gateways, anything speaking
//! `/chat/completions`): tools with arguments as a JSON string, usage from `usage`,
//! `choices: null` tolerated.

use std::time::Duration;

use hermes_shared::config::ProviderSettings;
use hermes_shared::model::{ChatMessage, Role, Usage};
use hermes_shared::openai_wire::{WireToolCall, encode_tool_call};
use reqwest::StatusCode;
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{CallSpec, Completion, ProviderError};

pub struct OpenAi {
    http: reqwest::Client,
    url: String,
    key: SecretString,
}

/// Retry-After is honoured up to this bound; longer waits move to the next backend.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

impl OpenAi {
    pub fn new(settings: &ProviderSettings) -> anyhow::Result<Self> {
        let key = settings
            .openai_api_key
            .clone()
            .ok_or_else(|| anyhow::anyhow!("OPENAI_API_KEY is not set"))?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .pool_idle_timeout(Duration::from_secs(90))
            .user_agent(concat!("hermes/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let url = format!(
            "{}/chat/completions",
            settings.openai_base_url.as_str().trim_end_matches('/')
        );
        Ok(Self { http, url, key })
    }

    pub async fn complete(&self, call: &CallSpec<'_>) -> Result<Completion, ProviderError> {
        let body = request_body(call);
        let resp = self
            .http
            .post(&self.url)
            .bearer_auth(self.key.expose_secret())
            .timeout(call.timeout)
            .json(&body)
            .send()
            .await
            .map_err(|e| transport_error(e, call.timeout))?;
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s).min(MAX_RETRY_AFTER));
        let text = resp
            .text()
            .await
            .map_err(|e| transport_error(e, call.timeout))?;
        if status == StatusCode::TOO_MANY_REQUESTS {
            return Err(ProviderError::RateLimited { retry_after });
        }
        if status.is_server_error() {
            return Err(ProviderError::Server {
                status: status.as_u16(),
                message: error_message(&text),
            });
        }
        if !status.is_success() {
            return Err(ProviderError::Rejected {
                status: status.as_u16(),
                message: error_message(&text),
            });
        }
        parse_response(&text)
    }
}

fn transport_error(e: reqwest::Error, timeout: Duration) -> ProviderError {
    if e.is_timeout() {
        ProviderError::Timeout(timeout)
    } else {
        // Without the URL: it may carry credentials in some deployments.
        ProviderError::Connect(e.without_url().to_string())
    }
}

fn error_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| body.chars().take(200).collect())
}

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

/// The JSON body of a chat completions request.
pub fn request_body(call: &CallSpec<'_>) -> Value {
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
    body
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// Parse a chat completions response body.
pub fn parse_response(text: &str) -> Result<Completion, ProviderError> {
    let wire: WireResponse = serde_json::from_str(text)
        .map_err(|e| ProviderError::Malformed(format!("not a chat completion: {e}")))?;
    let choice = wire
        .choices
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| ProviderError::Malformed("no choices in the response".into()))?;
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            let name = c.function.name.clone();
            c.into_tool_call().map_err(|e| {
                ProviderError::Malformed(format!(
                    "tool call {name} has arguments that are not JSON: {e}"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let usage = wire
        .usage
        .map(|u| Usage {
            input_tokens: u.prompt_tokens,
            output_tokens: u.completion_tokens,
            // Priced by the chain, which knows the logical model.
            cost_micro_usd: 0,
        })
        .unwrap_or_default();
    Ok(Completion {
        text: choice.message.content.filter(|t| !t.is_empty()),
        tool_calls,
        usage,
        finish_reason: choice.finish_reason.unwrap_or_else(|| "stop".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_shared::model::{ToolCall, ToolSpec};

    #[test]
    fn tool_calls_and_usage_are_parsed() {
        let body = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"call_1","type":"function","function":{"name":"current_time","arguments":"{\"timezone\":\"Asia/Tokyo\"}"}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#;
        let c = parse_response(body).unwrap();
        assert_eq!(c.text, None);
        assert_eq!(c.tool_calls[0].name, "current_time");
        assert_eq!(c.tool_calls[0].arguments["timezone"], "Asia/Tokyo");
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 12,
                output_tokens: 7,
                cost_micro_usd: 0,
            }
        );
        assert_eq!(c.finish_reason, "tool_calls");
    }

    #[test]
    fn null_choices_and_bad_arguments_are_malformed() {
        assert!(matches!(
            parse_response(r#"{"choices":null}"#),
            Err(ProviderError::Malformed(_))
        ));
        let bad = r#"{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"t","arguments":"{nope"}}]}}]}"#;
        assert!(matches!(
            parse_response(bad),
            Err(ProviderError::Malformed(_))
        ));
    }

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
        let body = request_body(&CallSpec {
            model_id: "gpt",
            max_tokens: 5,
            messages: &messages,
            tools: &tools,
            timeout: Duration::from_secs(1),
        });
        assert_eq!(
            body["messages"][1]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(body["messages"][2]["tool_call_id"], "c1");
        assert_eq!(body["tools"][0]["function"]["name"], "current_time");
        assert_eq!(body["max_tokens"], 5);
    }
}
