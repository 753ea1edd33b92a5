//! OpenAI's tool-call wire shape (`{"id", "type": "function", "function": {"name",
//! "arguments": "<JSON as a string>"}}`), shared by the OpenAI-compatible API that ingest
//! serves and the OpenAI-compatible provider the llm stage calls.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::model::ToolCall;

/// A tool call as OpenAI sends it.
#[derive(Debug, Deserialize)]
pub struct WireToolCall {
    pub id: String,
    pub function: WireFunction,
}

/// The function part of a wire tool call; `arguments` is JSON encoded as a string.
#[derive(Debug, Deserialize)]
pub struct WireFunction {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

impl WireToolCall {
    /// Our tool call, with the arguments parsed (an empty string means no arguments).
    pub fn into_tool_call(self) -> Result<ToolCall, serde_json::Error> {
        let arguments = if self.function.arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(&self.function.arguments)?
        };
        Ok(ToolCall {
            id: self.id,
            name: self.function.name,
            arguments,
            signature: None,
        })
    }
}

/// A tool call in OpenAI's wire shape.
pub fn encode_tool_call(c: &ToolCall) -> Value {
    json!({
        "id": c.id,
        "type": "function",
        "function": { "name": c.name, "arguments": c.arguments.to_string() }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_tolerates_empty_arguments() {
        let call = ToolCall {
            id: "c1".into(),
            name: "t".into(),
            arguments: json!({"a": 1}),
            signature: None,
        };
        let wire: WireToolCall = serde_json::from_value(encode_tool_call(&call)).unwrap();
        assert_eq!(wire.into_tool_call().unwrap(), call);
        let empty: WireToolCall =
            serde_json::from_value(json!({"id": "x", "function": {"name": "t"}})).unwrap();
        assert_eq!(empty.into_tool_call().unwrap().arguments, json!({}));
        let bad: WireToolCall = serde_json::from_value(
            json!({"id": "x", "function": {"name": "t", "arguments": "{no"}}),
        )
        .unwrap();
        assert!(bad.into_tool_call().is_err());
    }
}
