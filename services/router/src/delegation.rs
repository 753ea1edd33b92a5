//! Which runs are offered `delegate_task_async` (docs/a2a.md, "Delegating to other
//! workspaces"): the runs of an orchestrator workspace (its A2A tasks, its Forge agents'
//! runs), unless they were delegated `MAX_DEPTH` deep already. Every other run, a channel
//! chat's among them, is never offered it, so the tools stage refuses it whatever the model
//! asks for.

use std::time::Duration;

use hermes_db::GenericClient;
use hermes_runtime::stage::StageError;
use hermes_types::ids::WorkspaceId;
use hermes_types::model::ToolSpec;
use hermes_types::model::delegation::{Delegated, TOOL_NAME};
use hermes_types::ttl_cache::TtlCache;

/// How long a workspace's flag is trusted before it is read again: a change made with
/// `hermes workspaces set --orchestrator` applies within it.
const FLAG_TTL: Duration = Duration::from_secs(30);

/// Workspaces whose flag is remembered at once.
const FLAGS_CACHED: usize = 10_000;

/// The workspaces' `orchestrator` flags, read from `workspaces` and cached.
pub struct Orchestrators(TtlCache<WorkspaceId, bool>);

impl Default for Orchestrators {
    fn default() -> Self {
        Self(TtlCache::new(FLAG_TTL, FLAGS_CACHED))
    }
}

impl Orchestrators {
    /// `tools` as a run of `workspace` at delegation `depth` is offered them: with the
    /// delegation tool only for an orchestrator's run below `MAX_DEPTH`.
    pub async fn offered(
        &self,
        client: &impl GenericClient,
        tools: Vec<ToolSpec>,
        workspace: Option<WorkspaceId>,
        depth: u8,
    ) -> Result<Vec<ToolSpec>, StageError> {
        let Some(workspace) = workspace.filter(|_| Delegated::may_delegate(depth)) else {
            return Ok(without(tools));
        };
        if !tools.iter().any(|t| t.name == TOOL_NAME) {
            return Ok(tools);
        }
        let orchestrator = match self.0.get(&workspace) {
            Some(flag) => flag,
            None => {
                let flag = hermes_db::workspaces::is_orchestrator(client, workspace).await?;
                self.0.insert(workspace, flag);
                flag
            }
        };
        Ok(if orchestrator { tools } else { without(tools) })
    }
}

/// `tools` without the delegation tool.
pub fn without(mut tools: Vec<ToolSpec>) -> Vec<ToolSpec> {
    tools.retain(|t| t.name != TOOL_NAME);
    tools
}

#[cfg(test)]
mod tests {
    use hermes_types::model::delegation::MAX_DEPTH;
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_delegation_tool_is_taken_out() {
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
            toolset: "builtin".into(),
        };
        let kept = without(vec![spec("current_time"), spec(TOOL_NAME)]);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].name, "current_time");
        assert!(Delegated::may_delegate(MAX_DEPTH - 1));
    }
}
