//! A Forge's wake envelope, read after its signature held (docs/agents.md, "Hermes as a
//! Forge agent"): who it is for (`agent.profileKey`, and the Forge's `workspace`), what
//! happened (`kind`), and the dispatch fields that bound the run (`engagement_mode`,
//! `forge_contract_version`, `tool_allowlist`, `runtime_policy`, the same fields and rules
//! as `POST /v1/runs`). The rest of the envelope (the issue, the chat message, the Forge's
//! own dispatch record) is kept whole for the agent to read; the inbox, not the wake, is the
//! source of truth, so nothing else is required.

use hermes_runtime::http::{ApiError, ApiErrorCode};
use hermes_types::model::ToolPolicy;
use serde::Deserialize;
use serde_json::Value;

use crate::runs::request::DispatchFields;

/// Longest profile key, event name or workspace slug taken from a wake.
const MAX_NAME: usize = 128;

/// A wake, as far as Hermes needs to route it.
#[derive(Debug, PartialEq)]
pub struct Wake {
    /// `agent.profileKey`: the internal agent that answers.
    pub profile_key: String,
    /// `workspace.slug`, when the Forge sent one.
    pub workspace_slug: Option<String>,
    /// `kind` (else `X-Forge-Event`): `AGENT_ASSIGNED`, `CHAT_MESSAGE_POSTED`, …
    pub event: String,
    /// The run's host-tool policy, from the dispatch fields.
    pub policy: ToolPolicy,
    /// The contract version the Forge named.
    pub contract_version: Option<String>,
    /// The whole envelope, kept with the run and shown to the agent.
    pub envelope: Value,
}

#[derive(Deserialize)]
struct WireWake {
    #[serde(default)]
    kind: Option<Value>,
    #[serde(default)]
    workspace: Option<Value>,
    #[serde(default)]
    agent: Option<Value>,
    #[serde(flatten)]
    dispatch: DispatchFields,
}

fn malformed(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(ApiErrorCode::MalformedPayload, message)
}

/// A short printable name at `what`, or `None` when absent.
fn name(what: &str, v: Option<&Value>) -> Result<Option<String>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s))
            if !s.trim().is_empty() && s.len() <= MAX_NAME && !s.chars().any(char::is_control) =>
        {
            Ok(Some(s.clone()))
        }
        Some(_) => Err(malformed(format!(
            "{what} must be a string of 1 to {MAX_NAME} printable characters"
        ))),
    }
}

/// Read a verified wake body; `event_header` is `X-Forge-Event`, used when the envelope
/// names no `kind`.
pub fn parse(body: &[u8], event_header: Option<&str>) -> Result<Wake, ApiError> {
    let envelope: Value = serde_json::from_slice(body)
        .map_err(|e| malformed(format!("the wake is not JSON: {e}")))?;
    if !envelope.is_object() {
        return Err(malformed("the wake must be a JSON object"));
    }
    let wire: WireWake = serde_json::from_value(envelope.clone())
        .map_err(|e| malformed(format!("the wake is not understood: {e}")))?;
    let agent = wire.agent.as_ref().filter(|a| !a.is_null());
    if agent.is_some_and(|a| !a.is_object()) {
        return Err(malformed("agent must be an object"));
    }
    let profile_key = name("agent.profileKey", agent.and_then(|a| a.get("profileKey")))?
        .ok_or_else(|| {
            ApiError::bad_request(
                ApiErrorCode::MissingProfileKey,
                "agent.profileKey is required: it names the Hermes agent to wake",
            )
        })?;
    let workspace = wire.workspace.as_ref().filter(|w| !w.is_null());
    if workspace.is_some_and(|w| !w.is_object()) {
        return Err(malformed("workspace must be an object"));
    }
    let workspace_slug = name("workspace.slug", workspace.and_then(|w| w.get("slug")))?;
    let event = match name("kind", wire.kind.as_ref())? {
        Some(kind) => kind,
        None => name("X-Forge-Event", event_header.map(Value::from).as_ref())?
            .unwrap_or_else(|| "AGENT_ASSIGNED".into()),
    };
    let dispatched = wire.dispatch.settle()?;
    Ok(Wake {
        // Profile keys are lower-case in Hermes; a Forge's spelling may not be.
        profile_key: profile_key.to_ascii_lowercase(),
        workspace_slug,
        event,
        policy: dispatched.policy,
        contract_version: dispatched.contract_version,
        envelope,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_types::agent::EngagementMode;
    use serde_json::json;

    fn wake(v: Value) -> Result<Wake, ApiError> {
        parse(v.to_string().as_bytes(), None)
    }

    #[test]
    fn the_seeds_envelope_routes_by_profile_key_with_its_dispatch_fields() {
        let w = wake(json!({
            "kind": "AGENT_ASSIGNED",
            "workspace": {"id": "wks_axi", "slug": "axiom", "key": "AXI"},
            "agent": {"id": "agt_victor", "profileKey": "Victor"},
            "issue": {"id": "iss_01HX", "key": "AXI-42", "title": "..."},
            "dispatch": {"mode": "ROUND_ROBIN", "chosen": "agt_victor", "reason": "round-robin"},
            "engagement_mode": "REVIEW",
            "forge_contract_version": "2026-06-06.2",
            "tool_allowlist": [],
            "runtime_policy": {"contract_version": "2026-06-06.2", "engagement_mode": "REVIEW",
                "allowed_host_tools": [], "enforcement_layers": [{"kind": "forge-mcp", "enforced": true}]}
        }))
        .unwrap();
        assert_eq!(w.profile_key, "victor");
        assert_eq!(w.workspace_slug.as_deref(), Some("axiom"));
        assert_eq!(w.event, "AGENT_ASSIGNED");
        assert_eq!(w.policy.engagement_mode, EngagementMode::Review);
        assert_eq!(w.policy.tool_allowlist, Some(Vec::new()));
        assert_eq!(w.contract_version.as_deref(), Some("2026-06-06.2"));
        assert_eq!(w.envelope["issue"]["key"], "AXI-42");
    }

    #[test]
    fn a_bare_wake_is_an_execute_run_named_by_its_header() {
        let w = parse(
            json!({"agent": {"profileKey": "mizu"}})
                .to_string()
                .as_bytes(),
            Some("CHAT_MESSAGE_POSTED"),
        )
        .unwrap();
        assert_eq!(w.event, "CHAT_MESSAGE_POSTED");
        assert!(w.policy.is_default());
        assert!(w.workspace_slug.is_none() && w.contract_version.is_none());
    }

    #[test]
    fn bad_wakes_are_refused_with_what_is_wrong() {
        let code = |v: Value| wake(v).unwrap_err().code;
        assert_eq!(
            code(json!({"kind": "AGENT_ASSIGNED"})),
            ApiErrorCode::MissingProfileKey
        );
        assert_eq!(
            code(json!({"agent": {"id": "agt_1"}})),
            ApiErrorCode::MissingProfileKey
        );
        assert_eq!(
            code(json!({"agent": "victor"})),
            ApiErrorCode::MalformedPayload
        );
        assert_eq!(
            code(json!({"agent": {"profileKey": 7}})),
            ApiErrorCode::MalformedPayload
        );
        assert_eq!(code(json!([1, 2])), ApiErrorCode::MalformedPayload);
        assert_eq!(
            code(json!({"agent": {"profileKey": "v"}, "engagement_mode": "NAP"})),
            ApiErrorCode::InvalidRequest
        );
        assert_eq!(
            parse(b"{\"agent\":", None).unwrap_err().code,
            ApiErrorCode::MalformedPayload
        );
    }
}
