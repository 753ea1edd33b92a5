//! Which of the tools an MCP server offers in a sampling request our model sees
//! (docs/tools-and-mcp.md, "Tools in sampling"). The server runs those tools itself, so
//! withholding them from the model is the only gate we have: a tool passes when the
//! server's own `tools` filter (include/exclude) registers it, when no approval rule covers
//! it (nobody could approve a call the server makes right after our answer),
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
use crate::approval::ApprovalRules;
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

/// What decides which tools of one server's sampling requests the model sees.
pub struct SamplingGate {
    pub settings: McpServerSettings,
    /// The approval rules of the registry (the server's own and `[tools]
    /// require_approval`): a tool they gate is never shown.
    pub approvals: Arc<ApprovalRules>,
    /// The runs whose calls are in flight on the server.
    pub runs: Arc<RunsInFlight>,
}

impl SamplingGate {
    /// The tools of `offered` (named as the server `server` names them) the model may see
    /// now.
    pub fn admitted(&self, server: &str, offered: Vec<ToolSpec>) -> Vec<ToolSpec> {
        let toolset = naming::toolset(server);
        let runs = self.runs.policies();
        offered
            .into_iter()
            .filter(|t| self.settings.tools.admits(&t.name))
            .filter(|t| {
                let registered = naming::tool_name(server, &t.name);
                !self.approvals.requires(&registered, &toolset)
                    && runs.iter().all(|run| {
                        let local = self.settings.local_host;
                        policy::check_host(run, local, &toolset, &registered).is_ok()
                    })
            })
            .map(|t| ToolSpec {
                toolset: toolset.clone(),
                ..t
            })
            .collect()
    }
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

    /// The gate of the server `srv` configured by `toml_text`, with the approval rules of
    /// that configuration and `tools` (`[tools] require_approval`), under `runs`.
    fn gate(toml_text: &str, require_approval: &[&str], runs: &[ToolPolicy]) -> SamplingGate {
        let settings: McpServerSettings =
            toml::from_str(&format!("command = \"x\"\n{toml_text}")).unwrap();
        let servers = std::collections::BTreeMap::from([("srv".to_owned(), settings.clone())]);
        let tools = hermes_config::ToolsSettings {
            require_approval: require_approval.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let approvals = ApprovalRules::new(&tools, &servers, &[]).unwrap();
        let in_flight = Arc::new(RunsInFlight::default());
        sync::lock(&in_flight.runs)
            .extend(runs.iter().cloned().enumerate().map(|(i, p)| (i as u64, p)));
        SamplingGate {
            settings,
            approvals: Arc::new(approvals),
            runs: in_flight,
        }
    }

    fn shown(gate: &SamplingGate) -> Vec<String> {
        let offered = vec![spec("a"), spec("b"), spec("c")];
        let admitted = gate.admitted("srv", offered);
        assert!(admitted.iter().all(|t| t.toolset == "mcp-srv"));
        admitted.into_iter().map(|t| t.name).collect()
    }

    #[test]
    fn the_filter_approvals_and_every_run_in_flight_apply() {
        let filtered = "tools = { exclude = [\"c\"], require_approval = [\"b\"] }";
        assert_eq!(shown(&gate(filtered, &[], &[])), ["a"]);
        assert!(shown(&gate("requires_approval = true", &[], &[])).is_empty());
        assert!(shown(&gate("", &["mcp-srv"], &[])).is_empty());

        // A local-host server: a restricted run in flight hides everything, an allowlist
        // narrows to what it names, and every run in flight counts.
        let execute = ToolPolicy::default();
        let review = ToolPolicy {
            engagement_mode: EngagementMode::Review,
            tool_allowlist: None,
        };
        let listed = ToolPolicy {
            engagement_mode: EngagementMode::Execute,
            tool_allowlist: Some(vec!["mcp_srv_b".into()]),
        };
        let local = "local_host = true";
        assert_eq!(
            shown(&gate(local, &[], std::slice::from_ref(&execute))).len(),
            3
        );
        assert!(shown(&gate(local, &[], &[execute, review.clone()])).is_empty());
        assert_eq!(shown(&gate(local, &[], &[listed])), ["b"]);
        // Not on the host: the run's host-tool policy does not reach it.
        assert_eq!(shown(&gate("", &[], &[review])).len(), 3);
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
