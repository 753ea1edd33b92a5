//! The operator tools as `tools/list` shows them. Each tool's name, description and JSON
//! Schema live with its code (a [`Spec`] in its group's file under `tools/`); this file
//! only lists them. The argument names a tool accepts are read from its schema, so the two
//! cannot drift apart; the bounds a schema advertises (`maxLength`, `maximum`) are the
//! constants its parser enforces.

use serde_json::{Value, json};

use crate::tools::{channels, conversations, events, messages, permissions, send};

/// What `tools/list` shows of one tool.
pub struct Spec {
    /// The tool's name on the wire.
    pub name: &'static str,
    /// What it does, for the client's model.
    pub description: &'static str,
    /// The JSON Schema of its arguments.
    pub schema: fn() -> Value,
}

/// A tool of the operator server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    ConversationsList,
    ConversationGet,
    MessagesRead,
    AttachmentsFetch,
    ChannelsList,
    EventsPoll,
    EventsWait,
    MessagesSend,
    PermissionsListOpen,
    PermissionsRespond,
}

impl Tool {
    /// Every tool, in the order `tools/list` shows them.
    pub const ALL: &[Tool] = &[
        Tool::ConversationsList,
        Tool::ConversationGet,
        Tool::MessagesRead,
        Tool::AttachmentsFetch,
        Tool::ChannelsList,
        Tool::EventsPoll,
        Tool::EventsWait,
        Tool::MessagesSend,
        Tool::PermissionsListOpen,
        Tool::PermissionsRespond,
    ];

    /// The tool's name, description and schema.
    pub fn spec(self) -> &'static Spec {
        match self {
            Tool::ConversationsList => &conversations::LIST,
            Tool::ConversationGet => &conversations::GET,
            Tool::MessagesRead => &messages::READ,
            Tool::AttachmentsFetch => &messages::ATTACHMENTS,
            Tool::ChannelsList => &channels::LIST,
            Tool::EventsPoll => &events::POLL,
            Tool::EventsWait => &events::WAIT,
            Tool::MessagesSend => &send::SEND,
            Tool::PermissionsListOpen => &permissions::LIST_OPEN,
            Tool::PermissionsRespond => &permissions::RESPOND,
        }
    }

    /// The tool's name on the wire.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The tool named `name`, if any.
    pub fn parse(name: &str) -> Option<Tool> {
        Tool::ALL.iter().copied().find(|t| t.name() == name)
    }

    /// The names of the arguments the tool takes (its schema's properties).
    pub fn params(self) -> Vec<String> {
        (self.spec().schema)()["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The tool as `tools/list` shows it.
    pub fn listing(self) -> Value {
        let spec = self.spec();
        json!({
            "name": spec.name,
            "description": spec.description,
            "inputSchema": (spec.schema)(),
        })
    }
}

/// An object schema with `properties`, of which `required` must be present; no others.
pub fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// A string argument of at most `max` bytes.
pub fn string(description: &str, max: usize) -> Value {
    json!({ "type": "string", "description": description, "maxLength": max })
}

/// A `limit` argument: `default` when absent, at most `max`.
pub fn limit(default: i64, max: i64) -> Value {
    json!({
        "type": "integer", "minimum": 1, "maximum": max, "default": default,
        "description": format!("How many to return (default {default}, at most {max})"),
    })
}

/// The `platform` filter.
pub fn platform() -> Value {
    json!({
        "type": "string",
        "enum": hermes_types::model::Platform::ALL.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
        "description": "Only this platform",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_schemas_closed_objects() {
        let mut names: Vec<&str> = Tool::ALL.iter().map(|t| t.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Tool::ALL.len());
        for t in Tool::ALL {
            let schema = (t.spec().schema)();
            assert_eq!(schema["type"], "object", "{}", t.name());
            assert_eq!(schema["additionalProperties"], false, "{}", t.name());
            assert_eq!(Tool::parse(t.name()), Some(*t));
            // Every string has a bound and every integer a maximum.
            for (name, p) in schema["properties"].as_object().unwrap() {
                match p["type"].as_str() {
                    Some("string") if p.get("enum").is_none() && p.get("format").is_none() => {
                        assert!(p["maxLength"].is_u64(), "{}.{name}", t.name())
                    }
                    Some("integer") => assert!(p["maximum"].is_i64(), "{}.{name}", t.name()),
                    _ => {}
                }
            }
        }
        assert_eq!(Tool::parse("nope"), None);
    }
}
