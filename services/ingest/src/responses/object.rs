//! The OpenAI `response` object and its output items (docs/api.md, "Responses"), built from
//! what a response was asked and how its run ended. The same object answers a create, a
//! retrieve and ends a stream (`response.completed`), so all three agree.

use hermes_types::ids::{ResponseId, RunId};
use hermes_types::model::{CallParams, ChatMessage, Role, Usage};
use serde_json::{Value, json};

/// Where a response stands (OpenAI's `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    InProgress,
    Completed,
    Failed,
    /// Stopped at a caller's request (`POST /v1/runs/{id}/stop` of its run).
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }
}

/// What a response was asked: the same whatever its run did.
#[derive(Clone, Debug)]
pub struct Head {
    pub id: ResponseId,
    pub run: RunId,
    /// Unix seconds.
    pub created_at: i64,
    pub model: String,
    pub instructions: Option<String>,
    pub previous: Option<ResponseId>,
    pub params: CallParams,
    pub store: bool,
}

/// How the run stands: its status, output items, usage and error.
#[derive(Clone, Debug)]
pub struct Body {
    pub status: Status,
    pub output: Vec<Value>,
    pub usage: Option<Usage>,
    /// A failed run's code and message.
    pub error: Option<(String, String)>,
}

impl Body {
    /// A response whose run has not ended.
    pub fn in_progress() -> Self {
        Self {
            status: Status::InProgress,
            output: Vec::new(),
            usage: None,
            error: None,
        }
    }

    /// A completed run's answer after its tool round.
    pub fn completed(run: RunId, transcript: &[ChatMessage], text: &str, usage: Usage) -> Self {
        Self {
            status: Status::Completed,
            output: output_items(run, transcript, text),
            usage: Some(usage),
            error: None,
        }
    }

    /// A failed run (a stopped one is `cancelled`, with its error all the same).
    pub fn failed(code: &str, message: &str) -> Self {
        Self {
            status: if code == hermes_types::model::FailureCode::Cancelled.as_str() {
                Status::Cancelled
            } else {
                Status::Failed
            },
            output: Vec::new(),
            usage: None,
            error: Some((code.to_string(), message.to_string())),
        }
    }
}

/// The `response` object, with every field the official SDKs read.
pub fn response(head: &Head, body: &Body) -> Value {
    let usage = body.usage.map(|u| {
        json!({
            "input_tokens": u.input_tokens,
            "input_tokens_details": { "cached_tokens": 0 },
            "output_tokens": u.output_tokens,
            "output_tokens_details": { "reasoning_tokens": 0 },
            "total_tokens": u.total(),
        })
    });
    let error = body
        .error
        .as_ref()
        .map(|(code, message)| json!({ "code": code, "message": message }));
    json!({
        "id": head.id.wire(),
        "object": "response",
        "created_at": head.created_at,
        "status": body.status.as_str(),
        "background": false,
        "error": error,
        "incomplete_details": null,
        "instructions": head.instructions,
        "max_output_tokens": head.params.max_tokens,
        "metadata": {},
        "model": head.model,
        "output": body.output,
        "parallel_tool_calls": true,
        "previous_response_id": head.previous.map(|p| p.wire()),
        "reasoning": { "effort": null, "summary": null },
        "store": head.store,
        "temperature": head.params.temperature,
        "text": { "format": { "type": "text" } },
        "tool_choice": "auto",
        "tools": [],
        "top_p": head.params.top_p,
        "truncation": "disabled",
        "usage": usage,
        "user": null,
    })
}

/// The id of the `n`th message item of run `run`'s response.
pub fn message_id(run: RunId, n: usize) -> String {
    format!("msg_{}{n:02}", run.as_uuid().simple())
}

/// An assistant `message` item holding `text`.
pub fn message_item(id: &str, text: &str, status: Status) -> Value {
    let content = if status == Status::InProgress {
        Vec::new()
    } else {
        vec![output_text(text)]
    };
    json!({
        "type": "message",
        "id": id,
        "status": status.as_str(),
        "role": "assistant",
        "content": content,
    })
}

/// An `output_text` content part.
pub fn output_text(text: &str) -> Value {
    json!({ "type": "output_text", "text": text, "annotations": [], "logprobs": [] })
}

/// A `function_call` item: a tool the fleet ran, with its arguments as a JSON string.
pub fn function_call_item(call_id: &str, name: &str, arguments: &Value) -> Value {
    json!({
        "type": "function_call",
        "id": format!("fc_{call_id}"),
        "call_id": call_id,
        "name": name,
        "arguments": arguments.to_string(),
        "status": "completed",
    })
}

/// A `function_call_output` item: what the tool answered.
pub fn function_call_output_item(call_id: &str, output: &str) -> Value {
    json!({
        "type": "function_call_output",
        "id": format!("fco_{call_id}"),
        "call_id": call_id,
        "output": output,
        "status": "completed",
    })
}

/// The output items of an answer: the tool round in order (the words the model said before
/// asking for tools as a message, its calls, their outputs), then the answer's message.
pub fn output_items(run: RunId, transcript: &[ChatMessage], text: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut messages = 0;
    for m in transcript {
        match m.role {
            Role::Assistant => {
                if let Some(said) = m.content.as_deref().filter(|c| !c.is_empty()) {
                    items.push(message_item(
                        &message_id(run, messages),
                        said,
                        Status::Completed,
                    ));
                    messages += 1;
                }
                items.extend(
                    m.tool_calls
                        .iter()
                        .map(|c| function_call_item(&c.id, &c.name, &c.arguments)),
                );
            }
            Role::Tool => items.push(function_call_output_item(
                m.tool_call_id.as_deref().unwrap_or_default(),
                m.content.as_deref().unwrap_or_default(),
            )),
            Role::System | Role::User => {}
        }
    }
    items.push(message_item(
        &message_id(run, messages),
        text,
        Status::Completed,
    ));
    items
}

#[cfg(test)]
mod tests {
    use hermes_types::model::ToolCall;

    use super::*;

    #[test]
    fn a_stopped_run_reads_cancelled_and_a_failed_one_failed() {
        let stopped = Body::failed("cancelled", "stopped");
        assert_eq!(stopped.status, Status::Cancelled);
        assert_eq!(response(&head(), &stopped)["status"], "cancelled");
        assert_eq!(
            Body::failed("providers_unavailable", "down").status,
            Status::Failed
        );
    }

    fn head() -> Head {
        Head {
            id: ResponseId::new(),
            run: RunId::new(),
            created_at: 1_700_000_000,
            model: "hermes".into(),
            instructions: Some("be brief".into()),
            previous: None,
            params: CallParams {
                temperature: Some(0.5),
                ..CallParams::default()
            },
            store: true,
        }
    }

    #[test]
    fn a_completed_response_lists_the_tool_round_then_the_answer() {
        let h = head();
        let transcript = vec![
            ChatMessage {
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "current_time".into(),
                    arguments: json!({"timezone": "UTC"}),
                    signature: None,
                }],
                ..ChatMessage::text(Role::Assistant, "Let me check.")
            },
            ChatMessage::tool_result("call_1", "{\"time\":\"12:00\"}"),
        ];
        let usage = Usage {
            input_tokens: 7,
            output_tokens: 3,
            cost_micro_usd: 9,
        };
        let v = response(
            &h,
            &Body::completed(h.run, &transcript, "It is noon.", usage),
        );
        assert_eq!(v["id"], h.id.wire());
        assert_eq!(v["object"], "response");
        assert_eq!(v["status"], "completed");
        assert_eq!(v["instructions"], "be brief");
        assert_eq!(v["temperature"], 0.5);
        assert!(v["error"].is_null() && v["previous_response_id"].is_null());
        assert_eq!(
            (
                &v["usage"]["input_tokens"],
                &v["usage"]["output_tokens"],
                &v["usage"]["total_tokens"]
            ),
            (&json!(7), &json!(3), &json!(10))
        );
        let types: Vec<&str> = v["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "message",
                "function_call",
                "function_call_output",
                "message"
            ]
        );
        let call = &v["output"][1];
        assert_eq!(call["call_id"], "call_1");
        assert_eq!(call["name"], "current_time");
        assert_eq!(call["arguments"], "{\"timezone\":\"UTC\"}");
        assert_eq!(v["output"][2]["output"], "{\"time\":\"12:00\"}");
        let answer = &v["output"][3];
        assert_eq!(answer["role"], "assistant");
        assert_eq!(answer["content"][0]["type"], "output_text");
        assert_eq!(answer["content"][0]["text"], "It is noon.");
        assert_ne!(answer["id"], v["output"][0]["id"]);
    }

    #[test]
    fn a_failed_response_carries_its_error_and_no_output() {
        let h = head();
        let v = response(&h, &Body::failed("providers_unavailable", "try later"));
        assert_eq!(v["status"], "failed");
        assert_eq!(
            v["error"],
            json!({"code": "providers_unavailable", "message": "try later"})
        );
        assert_eq!(v["output"], json!([]));
        assert!(v["usage"].is_null());
        let v = response(&h, &Body::in_progress());
        assert_eq!(v["status"], "in_progress");
    }
}
