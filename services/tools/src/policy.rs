//! What one run may execute, applied to each tool call (docs/tools-and-mcp.md, "What a run
//! may call"): only a tool the run was offered (intent gating, the agent's toolsets and the
//! engagement mode chose those in the router, and the offer travels with the run); local-host
//! toolsets never in REVIEW, RESEARCH and DISCUSS runs (docs/agents.md); and, under an
//! allowlist, only the local-host toolsets or tools it names. A refusal is answered to the
//! model as a structured result, never executed.

use hermes_types::agent::EngagementMode;
use hermes_types::model::{LlmRequest, ToolPolicy, ToolSpec};
use serde_json::json;

use crate::registry::Tool;

/// What a run may call: the tools it was offered and its host-tool policy, both carried by
/// its request from the router on.
#[derive(Clone, Copy, Debug)]
pub struct Permit<'a> {
    pub offered: &'a [ToolSpec],
    pub policy: &'a ToolPolicy,
}

impl<'a> Permit<'a> {
    /// The permit of the run `request` belongs to.
    pub fn of(request: &'a LlmRequest) -> Self {
        Self {
            offered: &request.tools,
            policy: &request.policy,
        }
    }

    /// Whether `name` was among the tools offered to the run.
    pub fn offers(&self, name: &str) -> bool {
        self.offered.iter().any(|t| t.name == name)
    }
}

/// Why a call was refused (the `reason` label of `hermes_tool_refusals_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalReason {
    /// A tool the run was not offered: the model named it anyway (a prompt injection, a
    /// hallucinated name, a tool from an earlier conversation).
    NotOffered,
    /// A local-host tool in a restricted engagement mode.
    EngagementMode,
    /// A local-host tool the run's allowlist does not name.
    NotAllowlisted,
}

impl RefusalReason {
    pub const ALL: [RefusalReason; 3] = [
        RefusalReason::NotOffered,
        RefusalReason::EngagementMode,
        RefusalReason::NotAllowlisted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::NotOffered => "not_offered",
            RefusalReason::EngagementMode => "engagement_mode",
            RefusalReason::NotAllowlisted => "not_allowlisted",
        }
    }
}

/// Whether the host-tool `policy` lets `tool` run (the offer is checked before, by name).
pub fn check(policy: &ToolPolicy, tool: &dyn Tool) -> Result<(), RefusalReason> {
    let spec = tool.spec();
    check_host(policy, tool.local_host(), &spec.toolset, &spec.name)
}

/// Whether the host-tool `policy` lets a tool of `toolset` registered as `name` run, when
/// it acts on the host (`local_host`): also applied to the tools an MCP server offers in
/// sampling (docs/tools-and-mcp.md, "Tools in sampling").
pub fn check_host(
    policy: &ToolPolicy,
    local_host: bool,
    toolset: &str,
    name: &str,
) -> Result<(), RefusalReason> {
    if !local_host {
        return Ok(());
    }
    if policy.engagement_mode != EngagementMode::Execute {
        return Err(RefusalReason::EngagementMode);
    }
    if let Some(allowlist) = &policy.tool_allowlist
        && !allowlist
            .iter()
            .any(|entry| entry == toolset || entry == name)
    {
        return Err(RefusalReason::NotAllowlisted);
    }
    Ok(())
}

/// The tool result the model sees for a refused call.
pub fn refusal_text(tool: &str, reason: RefusalReason, policy: &ToolPolicy) -> String {
    let message = match reason {
        RefusalReason::EngagementMode => format!(
            "{tool} acts on the host and this run is in {} mode, where host tools are disabled",
            policy.engagement_mode.as_str()
        ),
        RefusalReason::NotAllowlisted => {
            format!("{tool} is not in this run's tool allowlist")
        }
        RefusalReason::NotOffered => format!(
            "{tool} was not offered to this run; only the tools listed with this conversation may be called"
        ),
    };
    json!({
        "refused": true,
        "tool": tool,
        "reason": reason.as_str(),
        "engagement_mode": policy.engagement_mode.as_str(),
        "message": message,
    })
    .to_string()
}
