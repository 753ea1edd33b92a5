//! Which of the tools an MCP server offers in a sampling request our model sees
//! (docs/tools-and-mcp.md, "Tools in sampling"). The server runs those tools itself, so
//! withholding them from the model is the only gate we have: a tool passes when the
//! server's own `tools` filter (include/exclude) registers it, when no approval rule of the
//! server covers it (nobody could approve a call the server makes right after our answer),
//! and, while calls of runs are in flight on that server, when every such run's host-tool
//! policy lets it run. Over stdio a sampling request does not say which call it serves, so
//! each in-flight run's policy applies: never more than the strictest of them allows.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hermes_config::McpServerSettings;
use hermes_types::model::{ToolPolicy, ToolSpec};
use hermes_types::sync;

use super::naming;
use crate::policy;

tokio::task_local! {
    /// The policy of the run whose tool call the current task is making.
    static RUN_POLICY: ToolPolicy;
}

/// Run `call` as a tool call of a run under `policy`, so that an MCP server sampling while
/// it runs sees the policy applied to the tools it offers.
pub async fn as_run<F: Future>(policy: &ToolPolicy, call: F) -> F::Output {
    RUN_POLICY.scope(policy.clone(), call).await
}

/// The policies of the runs whose calls are in flight on one server.
#[derive(Default)]
pub struct RunsInFlight {
    next: AtomicU64,
    runs: Mutex<Vec<(u64, ToolPolicy)>>,
}

/// One in-flight call of a run, noted until dropped.
pub struct InFlight {
    runs: Arc<RunsInFlight>,
    id: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        sync::lock(&self.runs.runs).retain(|(id, _)| *id != self.id);
    }
}

impl RunsInFlight {
    /// Note the run of the current task (none: a call made outside a run) until the guard
    /// drops.
    pub fn enter(self: &Arc<Self>) -> Option<InFlight> {
        let policy = RUN_POLICY.try_with(Clone::clone).ok()?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        sync::lock(&self.runs).push((id, policy));
        Some(InFlight {
            runs: self.clone(),
            id,
        })
    }

    /// The policies of the runs in flight now.
    pub fn policies(&self) -> Vec<ToolPolicy> {
        sync::lock(&self.runs)
            .iter()
            .map(|(_, p)| p.clone())
            .collect()
    }
}

/// The tools of `offered` (named as the server names them) that the model may see, for the
/// server `server` configured by `settings`, while runs under `runs` have calls on it.
pub fn admitted(
    server: &str,
    settings: &McpServerSettings,
    runs: &[ToolPolicy],
    offered: Vec<ToolSpec>,
) -> Vec<ToolSpec> {
    let toolset = naming::toolset(server);
    offered
        .into_iter()
        .filter(|t| settings.tools.admits(&t.name))
        .filter(|t| {
            !settings.requires_approval && !settings.tools.require_approval.contains(&t.name)
        })
        .filter(|t| {
            let registered = naming::tool_name(server, &t.name);
            runs.iter().all(|run| {
                policy::check_host(run, settings.local_host, &toolset, &registered).is_ok()
            })
        })
        .map(|t| ToolSpec {
            toolset: toolset.clone(),
            ..t
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_types::agent::EngagementMode;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
            toolset: String::new(),
        }
    }

    fn names(tools: &[ToolSpec]) -> Vec<&str> {
        tools.iter().map(|t| t.name.as_str()).collect()
    }

    fn settings(toml_text: &str) -> McpServerSettings {
        toml::from_str(&format!("command = \"x\"\n{toml_text}")).unwrap()
    }

    #[test]
    fn the_filter_approvals_and_every_run_in_flight_apply() {
        let offered = || vec![spec("a"), spec("b"), spec("c")];
        let s = settings("tools = { exclude = [\"c\"], require_approval = [\"b\"] }");
        let shown = admitted("srv", &s, &[], offered());
        assert_eq!(names(&shown), ["a"]);
        assert_eq!(shown[0].toolset, "mcp-srv");
        assert!(admitted("srv", &settings("requires_approval = true"), &[], offered()).is_empty());

        // A local-host server: a restricted run in flight hides everything, an allowlist
        // narrows to what it names, and every run in flight counts.
        let local = settings("local_host = true");
        let execute = ToolPolicy::default();
        let review = ToolPolicy {
            engagement_mode: EngagementMode::Review,
            tool_allowlist: None,
        };
        let listed = ToolPolicy {
            engagement_mode: EngagementMode::Execute,
            tool_allowlist: Some(vec!["mcp_srv_b".into()]),
        };
        assert_eq!(
            admitted("srv", &local, std::slice::from_ref(&execute), offered()).len(),
            3
        );
        assert!(admitted("srv", &local, &[execute.clone(), review.clone()], offered()).is_empty());
        assert_eq!(names(&admitted("srv", &local, &[listed], offered())), ["b"]);
        // Not on the host: the run's host-tool policy does not reach it.
        assert_eq!(
            admitted("srv", &settings(""), &[review], offered()).len(),
            3
        );
    }

    #[tokio::test]
    async fn a_call_under_a_run_is_in_flight_until_it_ends() {
        let runs = Arc::new(RunsInFlight::default());
        assert!(runs.enter().is_none(), "outside a run nothing is noted");
        let review = ToolPolicy {
            engagement_mode: EngagementMode::Review,
            tool_allowlist: None,
        };
        let seen = as_run(&review, async {
            let _call = runs.enter();
            runs.policies()
        })
        .await;
        assert_eq!(seen, [review]);
        assert!(runs.policies().is_empty());
    }
}
