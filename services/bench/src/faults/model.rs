//! The fake model of the fault run: an OpenAI-compatible `/v1/chat/completions` on loopback
//! that answers `echo: <last user message>` (as the built-in mock provider does) and counts
//! the calls made for each ledger token and purpose (the answer, the memory extraction after
//! it: told apart by their system prompts), so the ledger can tell a model call made twice
//! for one message (work redone after a stop or a kill) from one made once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::net::TcpListener;

/// The API key the fleet is given for the fake model.
pub const KEY: &str = "faults-model-key-0123456789";

/// Model calls per ledger token and purpose.
#[derive(Default)]
pub struct Calls(Mutex<HashMap<String, usize>>);

impl Calls {
    /// Calls (token and purpose) made more than once.
    pub fn repeated(&self) -> usize {
        self.0
            .lock()
            .map(|m| m.values().filter(|n| **n > 1).count())
            .unwrap_or(0)
    }

    /// Calls made for one ledger token, whatever their purpose.
    pub fn for_token(&self, token: &str) -> usize {
        self.0
            .lock()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| k.split(' ').next() == Some(token))
                    .map(|(_, n)| n)
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Calls made in all.
    pub fn total(&self) -> usize {
        self.0.lock().map(|m| m.values().sum()).unwrap_or(0)
    }
}

/// The text of the last user message of a chat completions body.
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            // Content parts: the text ones, joined.
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        })
        .unwrap_or_default()
}

async fn complete(State(calls): State<Arc<Calls>>, body: axum::body::Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let text = last_user_text(&body);
    let purpose: String = body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "system"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .chars()
        .take(48)
        .collect();
    if let Some(token) = text.split_whitespace().find(|w| w.starts_with("ledger-"))
        && let Ok(mut m) = calls.0.lock()
    {
        *m.entry(format!("{token} {purpose}")).or_default() += 1;
    }
    let answer = format!("echo: {text}");
    let words = |s: &str| s.split_whitespace().count() as u64;
    let usage = json!({
        "prompt_tokens": words(&text),
        "completion_tokens": words(&answer),
        "total_tokens": words(&text) + words(&answer),
    });
    if body["stream"] == true {
        let chunk = json!({
            "id": "chatcmpl-faults", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": answer}, "finish_reason": null}],
        });
        let last = json!({
            "id": "chatcmpl-faults", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": usage,
        });
        let sse = format!("data: {chunk}\n\ndata: {last}\n\ndata: [DONE]\n\n");
        return ([("content-type", "text/event-stream")], sse).into_response();
    }
    axum::Json(json!({
        "id": "chatcmpl-faults", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        "usage": usage,
    }))
    .into_response()
}

/// Serve the fake model; returns its base URL (with `/v1`).
pub async fn serve(calls: Arc<Calls>) -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = Router::new()
        .route("/v1/chat/completions", post(complete))
        .with_state(calls);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}/v1"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_user_message_is_echoed_whatever_its_shape() {
        let plain = json!({"messages": [
            {"role": "system", "content": "soul"},
            {"role": "user", "content": "hello ledger-000001"},
        ]});
        assert_eq!(last_user_text(&plain), "hello ledger-000001");
        let parts = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "ledger-000002"}]},
        ]});
        assert_eq!(last_user_text(&parts), "hello ledger-000002");
    }
}
