//! Which tool calls wait for an operator's approval (docs/operator-mcp.md, approvals), and
//! what the model is told of a call an operator denied or nobody answered in time.
//!
//! The rules come from the configuration: `[tools] require_approval` names built-in tools
//! and whole toolsets (`builtin`, `mcp-<server>`); `[mcp_servers.<name>] requires_approval`
//! covers every tool of a server, and `[mcp_servers.<name>.tools] require_approval` single
//! tools of it. They are kept with the registry, so `hermes tools reload` changes them with
//! the tools themselves.

use std::collections::{BTreeMap, BTreeSet};

use hermes_config::{McpServerSettings, ToolsSettings, mcp_toolset};
use hermes_types::model::{ApprovalDecision, ToolCall, ToolRequest, Verdict};
use serde_json::json;

use crate::mcp::naming;
use crate::policy::Permit;

/// The tools and toolsets whose calls wait for an operator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApprovalRules {
    /// Registered tool names (`http_fetch`, `mcp_github_create_issue`).
    tools: BTreeSet<String>,
    /// Toolsets every tool of which waits (`builtin`, `mcp-github`).
    toolsets: BTreeSet<String>,
}

impl ApprovalRules {
    /// The rules of a configuration whose built-in tools are `builtins` (name, toolset).
    /// An entry of `[tools] require_approval` that names neither a built-in tool nor a
    /// toolset of this configuration is refused, so a typo never leaves a tool ungated.
    pub fn new(
        tools: &ToolsSettings,
        servers: &BTreeMap<String, McpServerSettings>,
        builtins: &[(String, String)],
    ) -> Result<Self, String> {
        let mut rules = Self::default();
        for entry in &tools.require_approval {
            let builtin_tool = builtins.iter().any(|(name, _)| name == entry);
            let builtin_set = builtins.iter().any(|(_, set)| set == entry);
            let server_set = servers.keys().any(|s| mcp_toolset(s) == *entry);
            if builtin_tool {
                rules.tools.insert(entry.clone());
            } else if builtin_set || server_set {
                rules.toolsets.insert(entry.clone());
            } else {
                let known: Vec<&str> = builtins.iter().map(|(n, _)| n.as_str()).collect();
                return Err(format!(
                    "tools.require_approval: {entry:?} is neither a built-in tool ({}) nor a toolset (builtin, mcp-<server>)",
                    known.join(", ")
                ));
            }
        }
        for (server, settings) in servers {
            if settings.requires_approval {
                rules.toolsets.insert(mcp_toolset(server));
            }
            for tool in &settings.tools.require_approval {
                rules.tools.insert(naming::tool_name(server, tool));
            }
        }
        Ok(rules)
    }

    /// Whether a call of `name` in `toolset` waits for an operator.
    pub fn requires(&self, name: &str, toolset: &str) -> bool {
        self.tools.contains(name) || self.toolsets.contains(toolset)
    }

    /// Whether nothing waits (the common case: no lookup per call).
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.toolsets.is_empty()
    }
}

/// The calls of `req` that must wait for an operator before its round runs: those whose
/// tool requires approval and that carry no answer yet. A call the run was not offered
/// never waits: it is refused anyway, and an operator should not be asked about it.
pub fn waiting<'a>(rules: &ApprovalRules, req: &'a ToolRequest) -> Vec<&'a ToolCall> {
    if rules.is_empty() {
        return Vec::new();
    }
    let permit = Permit::of(&req.request);
    req.calls
        .iter()
        .filter(|call| {
            permit
                .offered
                .iter()
                .find(|spec| spec.name == call.name)
                .is_some_and(|spec| rules.requires(&spec.name, &spec.toolset))
        })
        .filter(|call| decision(req, &call.id).is_none())
        // A call with a result made (a held round resuming) is done.
        .filter(|call| req.result_of(&call.id).is_none())
        .collect()
}

/// The operator's answer to the call `call_id` of a resumed round, if it waited.
pub fn decision<'a>(req: &'a ToolRequest, call_id: &str) -> Option<&'a ApprovalDecision> {
    req.decisions.iter().find(|d| d.call_id == call_id)
}

/// The tool result the model sees for a call that was not allowed: the shape of a policy
/// refusal (`policy::refusal_text`), with the verdict and the operator's reason, so the
/// model can tell the user why and not retry blindly.
pub fn denial_text(tool: &str, decision: &ApprovalDecision) -> String {
    let (reason, message) = match decision.verdict {
        Verdict::TimedOut => (
            "approval_timed_out",
            format!(
                "{tool} needs an operator's approval and nobody answered in time; it did not run"
            ),
        ),
        Verdict::Denied | Verdict::Allowed => (
            "approval_denied",
            format!("an operator denied this call of {tool}; it did not run"),
        ),
    };
    json!({
        "refused": true,
        "denied": true,
        "tool": tool,
        "reason": reason,
        "verdict": decision.verdict.as_str(),
        "operator_reason": decision.reason,
        "message": message,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use hermes_types::model::{LlmRequest, ToolSpec};
    use serde_json::Value;

    use super::*;

    fn servers(toml_text: &str) -> BTreeMap<String, McpServerSettings> {
        #[derive(serde::Deserialize)]
        struct File {
            mcp_servers: BTreeMap<String, McpServerSettings>,
        }
        toml::from_str::<File>(toml_text).unwrap().mcp_servers
    }

    fn builtins() -> Vec<(String, String)> {
        ["current_time", "http_fetch"]
            .map(|n| (n.to_owned(), "builtin".to_owned()))
            .to_vec()
    }

    fn spec(name: &str, toolset: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
            toolset: toolset.into(),
        }
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({}),
            signature: None,
        }
    }

    #[test]
    fn rules_come_from_tools_servers_and_single_server_tools() {
        let servers = servers(
            "[mcp_servers.github]\ncommand = \"x\"\nrequires_approval = true\n\
             [mcp_servers.my-api]\ncommand = \"x\"\ntools = { require_approval = [\"drop.table\"] }\n\
             [mcp_servers.free]\ncommand = \"x\"\n",
        );
        let tools = ToolsSettings {
            require_approval: vec!["http_fetch".into()],
            ..ToolsSettings::default()
        };
        let rules = ApprovalRules::new(&tools, &servers, &builtins()).unwrap();
        assert!(rules.requires("http_fetch", "builtin"));
        assert!(!rules.requires("current_time", "builtin"));
        assert!(rules.requires("mcp_github_anything", "mcp-github"));
        assert!(rules.requires("mcp_my_api_drop_table", "mcp-my-api"));
        assert!(!rules.requires("mcp_my_api_select", "mcp-my-api"));
        assert!(!rules.requires("mcp_free_x", "mcp-free"));

        let whole = ToolsSettings {
            require_approval: vec!["builtin".into(), "mcp-free".into()],
            ..ToolsSettings::default()
        };
        let rules = ApprovalRules::new(&whole, &servers, &builtins()).unwrap();
        assert!(rules.requires("current_time", "builtin"));
        assert!(rules.requires("mcp_free_x", "mcp-free"));

        let typo = ToolsSettings {
            require_approval: vec!["http_fecth".into()],
            ..ToolsSettings::default()
        };
        let err = ApprovalRules::new(&typo, &servers, &builtins()).unwrap_err();
        assert!(err.contains("\"http_fecth\" is neither"), "{err}");
        assert!(
            ApprovalRules::new(&ToolsSettings::default(), &BTreeMap::new(), &builtins())
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn only_offered_gated_calls_without_an_answer_wait() {
        let tools = ToolsSettings {
            require_approval: vec!["http_fetch".into()],
            ..ToolsSettings::default()
        };
        let rules = ApprovalRules::new(&tools, &BTreeMap::new(), &builtins()).unwrap();
        let mut request: LlmRequest = serde_json::from_value(json!({
            "reply_to": {"platform": "api", "chat_id": "c"},
            "tier": "starter", "chain": [], "messages": [],
        }))
        .unwrap();
        request.tools = vec![
            spec("http_fetch", "builtin"),
            spec("current_time", "builtin"),
        ];
        let mut req = ToolRequest {
            request,
            calls: vec![call("a", "http_fetch"), call("b", "current_time")],
            decisions: Vec::new(),
            results: Vec::new(),
        };
        let ids = |w: Vec<&ToolCall>| w.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(waiting(&rules, &req)), ["a"]);
        // Not offered: refused by the policy, never put to an operator.
        req.request.tools.retain(|s| s.name != "http_fetch");
        assert!(waiting(&rules, &req).is_empty());
        req.request.tools.push(spec("http_fetch", "builtin"));
        req.decisions.push(ApprovalDecision {
            call_id: "a".into(),
            verdict: Verdict::Denied,
            by: Some("cli:ops".into()),
            reason: Some("not today".into()),
        });
        assert!(
            waiting(&rules, &req).is_empty(),
            "an answered call runs its round"
        );

        let text = denial_text("http_fetch", decision(&req, "a").unwrap());
        let body: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(body["refused"], true);
        assert_eq!(body["denied"], true);
        assert_eq!(body["verdict"], "denied");
        assert_eq!(body["reason"], "approval_denied");
        assert_eq!(body["operator_reason"], "not today");
    }
}
