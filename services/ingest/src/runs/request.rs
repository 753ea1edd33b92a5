//! The body of `POST /v1/runs`, validated: the input and its context (instructions,
//! history, the response it continues, the caller's session), and the dispatch fields of an
//! orchestrator (`engagement_mode`, `forge_contract_version`, `tool_allowlist`,
//! `runtime_policy`), which become the run's host-tool policy (docs/api.md, runs).
//!
//! Fields are read as raw JSON so that a wrong type gets a message naming the field.

use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::agent::EngagementMode;
use hermes_types::model::{ChatMessage, Role, ToolPolicy};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// Longest `input` or `instructions`, in bytes.
const MAX_TEXT: usize = 256 * 1024;
/// Longest identifier the caller gives (`session_id`, `previous_response_id`, a version).
const MAX_ID: usize = 256;
/// Most entries of an allowlist.
const MAX_ALLOWLIST: usize = 256;

#[derive(Deserialize)]
struct WireRun {
    #[serde(default)]
    input: Option<Value>,
    #[serde(default)]
    session_id: Option<Value>,
    #[serde(default)]
    instructions: Option<Value>,
    #[serde(default)]
    conversation_history: Option<Value>,
    #[serde(default)]
    previous_response_id: Option<Value>,
    #[serde(flatten)]
    dispatch: DispatchFields,
}

/// The dispatch fields of the agent contract, as an orchestrator sends them with a run
/// (`POST /v1/runs`) or a Forge with its wake (`POST /agents/forge`): read raw, so a wrong
/// type is named, and settled once into the run's host-tool policy.
#[derive(Debug, Default, Deserialize)]
pub struct DispatchFields {
    #[serde(default)]
    engagement_mode: Option<Value>,
    #[serde(default)]
    forge_contract_version: Option<Value>,
    #[serde(default)]
    tool_allowlist: Option<Value>,
    #[serde(default)]
    runtime_policy: Option<Value>,
}

/// What the dispatch fields settle.
#[derive(Debug, PartialEq)]
pub struct Dispatched {
    /// What the run's tool calls may execute: the mode, and what both allowlists name.
    pub policy: ToolPolicy,
    /// The contract version named (at the top level or in `runtime_policy`).
    pub contract_version: Option<String>,
}

impl DispatchFields {
    /// Validate the fields into the run's policy; the top-level values and
    /// `runtime_policy`'s must agree.
    pub fn settle(&self) -> Result<Dispatched, ApiError> {
        let top_mode = mode("engagement_mode", self.engagement_mode.clone())?;
        let version = identifier(
            "forge_contract_version",
            self.forge_contract_version.clone(),
        )?;
        let allowlist = names("tool_allowlist", self.tool_allowlist.clone())?;
        let rp = runtime_policy(&self.runtime_policy)?;
        let (rp_mode, rp_version, rp_tools) = match rp {
            Some(p) => (p.mode, p.contract_version, p.allowed_host_tools),
            None => (None, None, None),
        };
        let engagement_mode = agreed("engagement_mode", top_mode, rp_mode)?.unwrap_or_default();
        let contract_version = agreed("forge_contract_version", version, rp_version)?;
        // Both lists narrow what the run may use on the host: it gets what both name.
        let policy = ToolPolicy {
            engagement_mode,
            tool_allowlist: allowlist,
        }
        .inherit(&ToolPolicy {
            engagement_mode,
            tool_allowlist: rp_tools,
        });
        Ok(Dispatched {
            policy,
            contract_version,
        })
    }

    /// The fields as sent, into a run's `metadata`.
    pub fn record(self, metadata: &mut Map<String, Value>) {
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v.filter(|v| !v.is_null()) {
                metadata.insert(k.to_string(), v);
            }
        };
        put("engagement_mode", self.engagement_mode);
        put("forge_contract_version", self.forge_contract_version);
        put("tool_allowlist", self.tool_allowlist);
        put("runtime_policy", self.runtime_policy);
    }
}

/// A validated `POST /v1/runs` body.
#[derive(Debug, PartialEq)]
pub struct RunRequest {
    pub input: String,
    pub instructions: Option<String>,
    /// The caller's earlier turns, oldest first.
    pub history: Vec<ChatMessage>,
    /// The caller's own conversation id, shown back on the run.
    pub session_id: Option<String>,
    /// The stored response this run continues (recorded with the run).
    pub previous_response_id: Option<String>,
    /// What the run's tool calls may execute.
    pub policy: ToolPolicy,
    /// What is recorded with the run (its row's `metadata`): the session, the response it
    /// continues and the dispatch fields as sent.
    pub metadata: Value,
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(ApiErrorCode::InvalidRequest, message)
}

/// An optional string; `null` reads as absent.
fn string(name: &str, v: Option<Value>) -> Result<Option<String>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(format!("{name} must be a string"))),
    }
}

/// An optional identifier: 1 to [`MAX_ID`] printable characters.
fn identifier(name: &str, v: Option<Value>) -> Result<Option<String>, ApiError> {
    let Some(s) = string(name, v)? else {
        return Ok(None);
    };
    if s.is_empty() || s.len() > MAX_ID || s.chars().any(char::is_control) {
        return Err(invalid(format!(
            "{name} must be 1 to {MAX_ID} printable characters"
        )));
    }
    Ok(Some(s))
}

/// An optional engagement mode, by its name in any case.
fn mode(name: &str, v: Option<Value>) -> Result<Option<EngagementMode>, ApiError> {
    string(name, v)?
        .map(|s| {
            s.parse::<EngagementMode>()
                .map_err(|e| invalid(format!("{name}: {e}")))
        })
        .transpose()
}

/// An optional list of toolsets or tool names.
fn names(name: &str, v: Option<Value>) -> Result<Option<Vec<String>>, ApiError> {
    let items = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(invalid(format!("{name} must be an array of strings"))),
    };
    if items.len() > MAX_ALLOWLIST {
        return Err(invalid(format!(
            "{name} takes at most {MAX_ALLOWLIST} entries"
        )));
    }
    items
        .into_iter()
        .map(|item| match item {
            Value::String(s) if !s.trim().is_empty() && s.len() <= MAX_ID => Ok(s),
            _ => Err(invalid(format!(
                "{name} entries must be non-empty strings of at most {MAX_ID} bytes"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `conversation_history`: `{role, content}` turns, roles `system`, `user`, `assistant`.
fn history(v: Option<Value>) -> Result<Vec<ChatMessage>, ApiError> {
    let items = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(invalid(
                "conversation_history must be an array of {role, content} objects",
            ));
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, turn)| {
            let role = match turn.get("role").and_then(Value::as_str) {
                Some("system" | "developer") => Role::System,
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                other => {
                    return Err(invalid(format!(
                        "conversation_history[{i}].role must be \"system\", \"user\" or \"assistant\", not {}",
                        other.map_or("missing".to_string(), |r| format!("{r:?}"))
                    )));
                }
            };
            match turn.get("content") {
                Some(Value::String(text)) => Ok(ChatMessage::text(role, text.clone())),
                _ => Err(invalid(format!(
                    "conversation_history[{i}].content must be a string"
                ))),
            }
        })
        .collect()
}

/// `runtime_policy`, as seed contracts send it: `contract_version`, `engagement_mode`,
/// `allowed_host_tools` and `enforcement_layers` (recorded as sent).
struct RuntimePolicy {
    contract_version: Option<String>,
    mode: Option<EngagementMode>,
    allowed_host_tools: Option<Vec<String>>,
}

fn runtime_policy(v: &Option<Value>) -> Result<Option<RuntimePolicy>, ApiError> {
    let o = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(invalid("runtime_policy must be an object")),
    };
    let field = |k: &str| o.get(k).cloned();
    if let Some(layers) = o.get("enforcement_layers").filter(|l| !l.is_null()) {
        let ok = layers.as_array().is_some_and(|l| {
            l.iter().all(|layer| {
                layer.get("kind").is_some_and(Value::is_string)
                    && layer.get("enforced").is_none_or(Value::is_boolean)
            })
        });
        if !ok {
            return Err(invalid(
                "runtime_policy.enforcement_layers must be an array of {kind, enforced} objects",
            ));
        }
    }
    Ok(Some(RuntimePolicy {
        contract_version: identifier("runtime_policy.contract_version", field("contract_version"))?,
        mode: mode("runtime_policy.engagement_mode", field("engagement_mode"))?,
        allowed_host_tools: names(
            "runtime_policy.allowed_host_tools",
            field("allowed_host_tools"),
        )?,
    }))
}

/// The one value of a field given at the top level and in `runtime_policy`: they must agree.
fn agreed<T: PartialEq>(
    name: &str,
    top: Option<T>,
    inner: Option<T>,
) -> Result<Option<T>, ApiError> {
    match (top, inner) {
        (Some(a), Some(b)) if a != b => Err(invalid(format!(
            "{name} and runtime_policy disagree; send one value"
        ))),
        (a, b) => Ok(a.or(b)),
    }
}

/// Parse and validate a `POST /v1/runs` body.
pub fn parse(body: &[u8]) -> Result<RunRequest, ApiError> {
    let wire: WireRun = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(
            ApiErrorCode::InvalidJson,
            format!("request body is not a run request: {e}"),
        )
    })?;
    let input = match wire.input {
        Some(Value::String(s)) if !s.trim().is_empty() => s,
        Some(Value::String(_)) => return Err(invalid("input must not be empty")),
        None | Some(Value::Null) => return Err(invalid("input is required")),
        Some(_) => return Err(invalid("input must be a string")),
    };
    let instructions = string("instructions", wire.instructions)?.filter(|s| !s.trim().is_empty());
    if input.len() > MAX_TEXT || instructions.as_ref().is_some_and(|s| s.len() > MAX_TEXT) {
        return Err(invalid(format!(
            "input and instructions take at most {MAX_TEXT} bytes each"
        )));
    }
    let history = history(wire.conversation_history)?;
    let session_id = identifier("session_id", wire.session_id)?;
    let previous_response_id = identifier("previous_response_id", wire.previous_response_id)?;
    let policy = wire.dispatch.settle()?.policy;
    let mut metadata = Map::new();
    let mut record = |k: &str, v: Option<Value>| {
        if let Some(v) = v.filter(|v| !v.is_null()) {
            metadata.insert(k.to_string(), v);
        }
    };
    record("session_id", session_id.clone().map(Value::String));
    record(
        "previous_response_id",
        previous_response_id.clone().map(Value::String),
    );
    wire.dispatch.record(&mut metadata);
    // The policy the run is held to, as applied (after any narrowing).
    metadata.insert("policy".into(), json!(policy));
    Ok(RunRequest {
        input,
        instructions,
        history,
        session_id,
        previous_response_id,
        policy,
        metadata: Value::Object(metadata),
    })
}

/// The run's conversation: the caller's instructions as a system turn, the turns rebuilt
/// from `previous_response_id` (`earlier`), the caller's own history, then the input.
pub fn conversation(request: &RunRequest, earlier: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let mut turns = Vec::with_capacity(request.history.len() + earlier.len() + 2);
    if let Some(instructions) = &request.instructions {
        turns.push(ChatMessage::text(Role::System, instructions.clone()));
    }
    turns.extend(earlier);
    turns.extend(request.history.iter().cloned());
    turns.push(ChatMessage::text(Role::User, request.input.clone()));
    turns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(body: Value) -> Result<RunRequest, ApiError> {
        parse(body.to_string().as_bytes())
    }

    fn message(body: Value) -> String {
        run(body).unwrap_err().message
    }

    #[test]
    fn a_plain_input_is_an_execute_run_with_no_list() {
        let r = run(json!({"input": "hello"})).unwrap();
        assert_eq!(r.input, "hello");
        assert!(r.policy.is_default());
        let turns = conversation(&r, Vec::new());
        assert_eq!(turns, vec![ChatMessage::text(Role::User, "hello")]);
    }

    #[test]
    fn context_is_layered_in_order() {
        let r = run(json!({
            "input": "and now?", "instructions": "be brief", "session_id": "space-1",
            "previous_response_id": "resp_1",
            "conversation_history": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"}],
        }))
        .unwrap();
        let earlier = vec![ChatMessage::text(Role::User, "stored")];
        let roles: Vec<(Role, String)> = conversation(&r, earlier)
            .into_iter()
            .map(|m| (m.role, m.content.unwrap_or_default()))
            .collect();
        assert_eq!(
            roles,
            [
                (Role::System, "be brief".to_string()),
                (Role::User, "stored".into()),
                (Role::User, "hi".into()),
                (Role::Assistant, "hey".into()),
                (Role::User, "and now?".into()),
            ]
        );
        assert_eq!(r.metadata["session_id"], "space-1");
        assert_eq!(r.metadata["previous_response_id"], "resp_1");
    }

    #[test]
    fn the_seed_dispatch_becomes_the_run_policy() {
        let r = run(json!({
            "input": "review AXI-42",
            "engagement_mode": "REVIEW",
            "forge_contract_version": "2026-06-06.2",
            "tool_allowlist": [],
            "runtime_policy": {
                "contract_version": "2026-06-06.2",
                "engagement_mode": "REVIEW",
                "allowed_host_tools": [],
                "enforcement_layers": [
                    {"kind": "forge-mcp", "enforced": true},
                    {"kind": "hermes-host", "enforced": true}
                ]
            }
        }))
        .unwrap();
        assert_eq!(r.policy.engagement_mode, EngagementMode::Review);
        assert_eq!(r.policy.tool_allowlist, Some(Vec::new()));
        assert_eq!(r.metadata["forge_contract_version"], "2026-06-06.2");
        assert_eq!(
            r.metadata["runtime_policy"]["enforcement_layers"][1]["kind"],
            "hermes-host"
        );
        assert_eq!(r.metadata["policy"]["engagement_mode"], "REVIEW");
    }

    #[test]
    fn both_allowlists_narrow() {
        let r = run(json!({
            "input": "x", "engagement_mode": "execute",
            "tool_allowlist": ["terminal", "git"],
            "runtime_policy": {"allowed_host_tools": ["git", "filesystem"]},
        }))
        .unwrap();
        assert_eq!(r.policy.engagement_mode, EngagementMode::Execute);
        assert_eq!(r.policy.tool_allowlist, Some(vec!["git".to_string()]));
    }

    #[test]
    fn bad_input_gets_a_message_naming_the_field() {
        assert_eq!(message(json!({})), "input is required");
        assert_eq!(message(json!({"input": "  "})), "input must not be empty");
        assert_eq!(message(json!({"input": 3})), "input must be a string");
        assert!(
            message(json!({"input": "x", "engagement_mode": "AUDIT"})).contains(
                "engagement_mode: \"AUDIT\" is not one of EXECUTE, REVIEW, RESEARCH, DISCUSS"
            )
        );
        assert!(
            message(json!({"input": "x", "engagement_mode": "REVIEW", "runtime_policy": {"engagement_mode": "EXECUTE"}}))
                .contains("disagree")
        );
        assert!(
            message(json!({"input": "x", "tool_allowlist": "terminal"})).contains("tool_allowlist")
        );
        assert!(message(json!({"input": "x", "tool_allowlist": [""]})).contains("tool_allowlist"));
        assert!(message(json!({"input": "x", "runtime_policy": []})).contains("runtime_policy"));
        assert!(
            message(json!({"input": "x", "runtime_policy": {"enforcement_layers": [{"enforced": true}]}}))
                .contains("enforcement_layers")
        );
        assert!(
            message(
                json!({"input": "x", "conversation_history": [{"role": "tool", "content": "x"}]})
            )
            .contains("conversation_history[0].role")
        );
        assert!(message(json!({"input": "x", "session_id": ""})).contains("session_id"));
        assert_eq!(parse(b"{").unwrap_err().code, ApiErrorCode::InvalidJson);
    }
}
