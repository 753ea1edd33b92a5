//! The tools of the agent MCP surface as `tools/list` shows them: each one's name (the
//! contract's dotted names, docs/agents.md, "The tools"), the older short names still
//! callable as aliases, what each does, and the JSON Schema of its arguments. The argument
//! names a tool accepts are read from its schema, so the two cannot drift apart.

use serde_json::{Value, json};

/// A tool of the surface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    AgentsMe,
    AgentsHeartbeat,
    InboxList,
    InboxAck,
    ContextBundle,
    ChatAppendMessage,
    ChatStartDraft,
    ChatAppendDraftChunk,
    ChatFinalizeDraft,
    RunsFail,
    MemoryRemember,
    ChatSendMessage,
}

/// The `runId` argument every run tool takes.
fn run_id() -> Value {
    json!({ "type": "string", "format": "uuid", "description": "The run, as agent.inbox.list shows it" })
}

/// The contract's `issueId`: in Hermes the issue an agent works is the run.
fn issue_id() -> Value {
    json!({ "type": "string", "format": "uuid", "description": "The issue: in Hermes, the run (its runId, the wake's issue.id)" })
}

/// The contract's `threadId`: the thread a chat reply goes to is its run's chat, named by
/// the run's id (docs/agents.md, "Threads and issues").
fn thread_id() -> Value {
    json!({ "type": "string", "format": "uuid", "description": "The chat thread to answer: in Hermes, the run awaiting the reply (the wake's threadId, equal to its runId)" })
}

/// Arguments of which one names the run.
fn one_of(names: &[&str]) -> Value {
    Value::Array(names.iter().map(|n| json!({ "required": [n] })).collect())
}

/// `schema` requiring one of `names` (`anyOf`: either names the same run).
fn with_one_of(mut schema: Value, names: &[&str]) -> Value {
    schema["anyOf"] = one_of(names);
    schema
}

/// An object schema with `properties`, of which `required` must be present; no others.
fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

impl Tool {
    /// Every tool, in the order `tools/list` shows them.
    pub const ALL: [Tool; 12] = [
        Tool::AgentsMe,
        Tool::AgentsHeartbeat,
        Tool::InboxList,
        Tool::InboxAck,
        Tool::ContextBundle,
        Tool::ChatAppendMessage,
        Tool::ChatStartDraft,
        Tool::ChatAppendDraftChunk,
        Tool::ChatFinalizeDraft,
        Tool::RunsFail,
        Tool::MemoryRemember,
        Tool::ChatSendMessage,
    ];

    /// The tool's name on the wire: the contract's, as `tools/list` shows it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::AgentsMe => "agents.me",
            Tool::AgentsHeartbeat => "agents.heartbeat",
            Tool::InboxList => "agent.inbox.list",
            Tool::InboxAck => "agent.inbox.ack",
            Tool::ContextBundle => "agent.context.bundle",
            Tool::ChatAppendMessage => "chat.appendMessage",
            Tool::ChatStartDraft => "chat.startDraft",
            Tool::ChatAppendDraftChunk => "chat.appendDraftChunk",
            Tool::ChatFinalizeDraft => "chat.finalizeDraft",
            Tool::RunsFail => "runs.fail",
            Tool::MemoryRemember => "memory.remember",
            Tool::ChatSendMessage => "chat.sendMessage",
        }
    }

    /// Older names that still call a tool (docs/agents.md, "The tools"): not listed by
    /// `tools/list`, answered by both transports like the contract's names.
    pub const ALIASES: [(&'static str, Tool); 3] = [
        ("inbox.list", Tool::InboxList),
        ("inbox.ack", Tool::InboxAck),
        ("context.bundle", Tool::ContextBundle),
    ];

    /// The tool named `name` (its contract name or an alias), if any.
    pub fn parse(name: &str) -> Option<Tool> {
        Tool::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .or_else(|| {
                Self::ALIASES
                    .iter()
                    .find(|(a, _)| *a == name)
                    .map(|(_, t)| *t)
            })
    }

    /// What the tool does, for the agent's model.
    pub fn description(self) -> &'static str {
        match self {
            Tool::AgentsMe => {
                "The calling agent (the key's linked agent): id, profileKey, displayName, kind, capabilities, maxConcurrent, status, engagementMode, lastHeartbeatAt, openRuns."
            }
            Tool::AgentsHeartbeat => {
                "Record that the agent is up: bumps lastHeartbeatAt; status ONLINE, BUSY or OFFLINE when given, else OFFLINE becomes ONLINE and BUSY stays."
            }
            Tool::InboxList => {
                "The agent's open runs whose reply is owed, oldest first: status unacked (default), acked or all."
            }
            Tool::InboxAck => {
                "Acknowledge a run (clears 'wake sent'); idempotent. Always ack, even when you will not answer."
            }
            Tool::ContextBundle => {
                "What to answer a run with (issueId or runId: in Hermes the issue is the run): the message with its attachments (media references), the conversation's recent turns, what is known of the user (none in a group chat), and runProtocol (mode, mutationAllowed, toolAllowlist). Only until the run's reply is given (RUN_ENDED after)."
            }
            Tool::ChatAppendMessage => {
                "Answer a run (threadId or runId) with one message: delivered to the user's channel or API caller, and the run completes. A run has one reply."
            }
            Tool::ChatStartDraft => {
                "Start a streamed answer of a run (threadId or runId); returns draftId for chat.appendDraftChunk and chat.finalizeDraft."
            }
            Tool::ChatAppendDraftChunk => {
                "Add text to a draft: API and SSE callers see the delta at once, a Telegram chat sees one message grow."
            }
            Tool::ChatFinalizeDraft => {
                "Finish a draft as the run's answer (body, or the text so far): delivered once, replacing the draft, and the run completes."
            }
            Tool::RunsFail => {
                "Give a run up: the user is told it could not be answered and gets the credit back; reason is kept for operators."
            }
            Tool::MemoryRemember => {
                "Remember something about the run's user (key = value) while the run is open. A mutation: refused in REVIEW, RESEARCH and DISCUSS runs. Facts are capped per user (LIMIT_EXCEEDED) and expire under retention."
            }
            Tool::ChatSendMessage => {
                "Send a message to another conversation of the run's user (a chat channel linked to that user). A mutation: refused in REVIEW, RESEARCH and DISCUSS runs."
            }
        }
    }

    /// The JSON Schema of the tool's arguments.
    pub fn input_schema(self) -> Value {
        let text = |max: usize, what: &str| json!({ "type": "string", "minLength": 1, "maxLength": max, "description": what });
        match self {
            Tool::AgentsMe => object(json!({}), &[]),
            Tool::AgentsHeartbeat => object(
                json!({ "status": { "type": "string", "enum": ["ONLINE", "BUSY", "OFFLINE"] } }),
                &[],
            ),
            Tool::InboxList => object(
                json!({
                    "status": { "type": "string", "enum": ["unacked", "acked", "all"], "default": "unacked" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": super::MAX_LIST, "default": super::DEFAULT_LIST },
                }),
                &[],
            ),
            Tool::InboxAck => object(json!({ "runId": run_id() }), &["runId"]),
            Tool::ContextBundle => with_one_of(
                object(json!({ "runId": run_id(), "issueId": issue_id() }), &[]),
                &["runId", "issueId"],
            ),
            Tool::ChatStartDraft => with_one_of(
                object(json!({ "runId": run_id(), "threadId": thread_id() }), &[]),
                &["runId", "threadId"],
            ),
            Tool::ChatAppendMessage => with_one_of(
                object(
                    json!({ "runId": run_id(), "threadId": thread_id(), "body": text(super::MAX_TEXT, "The answer") }),
                    &["body"],
                ),
                &["runId", "threadId"],
            ),
            // The draft names its run: runId or threadId may be left out.
            Tool::ChatAppendDraftChunk => object(
                json!({
                    "runId": run_id(),
                    "threadId": thread_id(),
                    "draftId": { "type": "string", "format": "uuid" },
                    "delta": text(super::MAX_TEXT, "The next piece of text"),
                }),
                &["draftId", "delta"],
            ),
            Tool::ChatFinalizeDraft => object(
                json!({
                    "runId": run_id(),
                    "threadId": thread_id(),
                    "draftId": { "type": "string", "format": "uuid" },
                    "body": text(super::MAX_TEXT, "The final text (default: the draft so far)"),
                }),
                &["draftId"],
            ),
            Tool::RunsFail => object(
                json!({ "runId": run_id(), "reason": text(super::MAX_REASON, "Why, for operators (never shown to the user)") }),
                &["runId", "reason"],
            ),
            Tool::MemoryRemember => object(
                json!({
                    "runId": run_id(),
                    "key": { "type": "string", "pattern": "^[a-z][a-z0-9_]{0,63}$" },
                    "value": text(super::MAX_MEMORY_VALUE, "What to remember"),
                }),
                &["runId", "key", "value"],
            ),
            Tool::ChatSendMessage => object(
                json!({
                    "runId": run_id(),
                    "platform": { "type": "string", "enum": ["telegram", "whatsapp", "instagram", "slack"] },
                    "chatId": text(128, "The chat (the user's sender id on that platform)"),
                    "body": text(super::MAX_TEXT, "The message"),
                }),
                &["runId", "platform", "chatId", "body"],
            ),
        }
    }

    /// The argument names the tool accepts (its schema's properties).
    pub fn params(self) -> Vec<String> {
        self.input_schema()["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The entry of `tools/list`.
    pub fn listing(self) -> Value {
        json!({
            "name": self.name(),
            "description": self.description(),
            "inputSchema": self.input_schema(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Tool;

    #[test]
    fn every_tool_is_found_by_its_name_and_has_an_object_schema() {
        for t in Tool::ALL {
            assert_eq!(Tool::parse(t.name()), Some(t));
            let schema = t.input_schema();
            assert_eq!(schema["type"], "object", "{}", t.name());
            for required in schema["required"].as_array().unwrap() {
                assert!(
                    t.params().contains(&required.as_str().unwrap().to_string()),
                    "{} requires an argument it does not describe",
                    t.name()
                );
            }
        }
        assert_eq!(Tool::parse("issues.assigned"), None);
    }

    #[test]
    fn the_contract_names_are_listed_and_the_aliases_call_the_same_tools() {
        for name in [
            "agent.inbox.list",
            "agent.inbox.ack",
            "agent.context.bundle",
        ] {
            let tool = Tool::parse(name).unwrap();
            assert_eq!(tool.name(), name);
        }
        for (alias, tool) in Tool::ALIASES {
            assert_eq!(Tool::parse(alias), Some(tool));
            assert_ne!(tool.name(), alias, "an alias is not what tools/list shows");
        }
        assert!(
            Tool::ContextBundle
                .params()
                .contains(&"issueId".to_string())
        );
        for t in [
            Tool::ChatAppendMessage,
            Tool::ChatStartDraft,
            Tool::ChatAppendDraftChunk,
            Tool::ChatFinalizeDraft,
        ] {
            assert!(t.params().contains(&"threadId".to_string()), "{}", t.name());
        }
    }
}
