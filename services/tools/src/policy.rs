//! The engagement-mode policy of a run applied to one tool call (docs/agents.md): local-host
//! toolsets never execute in REVIEW, RESEARCH and DISCUSS runs, and a run's allowlist admits
//! only the local-host toolsets or tools it names. A refusal is answered to the model as a
//! structured result, never executed.

use hermes_types::agent::EngagementMode;
use hermes_types::model::ToolPolicy;
use serde_json::json;

use crate::registry::Tool;

/// Why a call was refused (the `reason` label of `hermes_tool_refusals_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalReason {
    /// A local-host tool in a restricted engagement mode.
    EngagementMode,
    /// A local-host tool the run's allowlist does not name.
    NotAllowlisted,
}

impl RefusalReason {
    pub const ALL: [RefusalReason; 2] =
        [RefusalReason::EngagementMode, RefusalReason::NotAllowlisted];

    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::EngagementMode => "engagement_mode",
            RefusalReason::NotAllowlisted => "not_allowlisted",
        }
    }
}

/// Whether `tool` may run under `policy`.
pub fn check(policy: &ToolPolicy, tool: &dyn Tool) -> Result<(), RefusalReason> {
    if !tool.local_host() {
        return Ok(());
    }
    if policy.engagement_mode != EngagementMode::Execute {
        return Err(RefusalReason::EngagementMode);
    }
    if let Some(allowlist) = &policy.tool_allowlist {
        let spec = tool.spec();
        if !allowlist
            .iter()
            .any(|entry| *entry == spec.toolset || *entry == spec.name)
        {
            return Err(RefusalReason::NotAllowlisted);
        }
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
