//! `delegate_task_async`: the registry's entry for delegation (docs/a2a.md, "Delegating to
//! other workspaces"). It is published like every built-in, so the router can offer it and
//! `[tools] require_approval` can name it; its calls are not run one by one but started
//! together by the tools stage (`crate::delegate`), which holds their round until the runs
//! they start have ended.

use hermes_types::model::ToolSpec;
use hermes_types::model::delegation::{MAX_TASK_BYTES, TOOL_NAME};
use serde_json::{Value, json};

use crate::registry::{Tool, ToolError, ToolFuture};

pub struct DelegateTask;

/// A call's arguments, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arguments {
    /// The workspace's id or slug.
    pub workspace: String,
    pub task: String,
}

impl DelegateTask {
    /// The arguments of a call, bounded: a workspace named, a task of 1 to
    /// [`MAX_TASK_BYTES`] bytes.
    pub fn arguments(arguments: &Value) -> Result<Arguments, ToolError> {
        let text = |name: &str| match arguments.get(name) {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            _ => Err(ToolError::InvalidArguments(format!(
                "{name} must be a non-empty string"
            ))),
        };
        let workspace = text("workspace")?;
        if workspace.len() > 64 {
            return Err(ToolError::InvalidArguments(
                "workspace must be a workspace's id or slug".into(),
            ));
        }
        let task = text("task")?;
        if task.len() > MAX_TASK_BYTES {
            return Err(ToolError::InvalidArguments(format!(
                "task is longer than {MAX_TASK_BYTES} bytes"
            )));
        }
        Ok(Arguments { workspace, task })
    }
}

impl Tool for DelegateTask {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: TOOL_NAME.into(),
            description: "Hand a task to the agent of another workspace. Its answer comes back as this call's result once it is done; several calls in one turn run side by side.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "workspace": {
                        "type": "string",
                        "description": "The id or slug of the workspace whose agent does the task"
                    },
                    "task": {
                        "type": "string",
                        "description": "What the agent should do, with everything it needs to know"
                    }
                },
                "required": ["workspace", "task"]
            }),
            toolset: super::TOOLSET.into(),
        }
    }

    fn call<'a>(&'a self, _arguments: &'a Value) -> ToolFuture<'a> {
        // The stage starts these calls itself (crate::delegate); one reaching here was
        // planned by no round, so it reports that rather than start a run untracked.
        Box::pin(async {
            Err(ToolError::Failed(format!(
                "{TOOL_NAME} runs only as part of a tool round"
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_bounded() {
        let ok = DelegateTask::arguments(&json!({"workspace": " w1 ", "task": "draft"})).unwrap();
        assert_eq!(ok.workspace, "w1");
        assert_eq!(ok.task, "draft");
        assert!(DelegateTask::arguments(&json!({"workspace": "w1"})).is_err());
        assert!(DelegateTask::arguments(&json!({"workspace": "", "task": "t"})).is_err());
        assert!(DelegateTask::arguments(&json!({"workspace": 3, "task": "t"})).is_err());
        let long = "x".repeat(MAX_TASK_BYTES + 1);
        assert!(DelegateTask::arguments(&json!({"workspace": "w", "task": long})).is_err());
        assert!(
            DelegateTask::arguments(&json!({"workspace": "w".repeat(65), "task": "t"})).is_err()
        );
    }
}
