//! A Forge's wake (docs/agents.md, "Hermes as a Forge agent"): the internal agent ingest
//! routed it to answers with its own persona, offered its tools including the Forge's MCP
//! server's (`[mcp_servers.forge]`). No user, no credit, no session.
//!
//! The router does not send the run to the model directly: it sends a preflight to the
//! tools stage (which holds the Forge's MCP session), which lists the agent's unacked runs,
//! acknowledges the woken one and reads its context bundle before the model is called
//! (docs/agents.md, "The loop, enforced"). The system prompt tells the model those steps
//! are done and what remains: act through the Forge's tools.
//!
//! The run's host-tool policy is the agent's own narrowed by the wake's (`engagement_mode`,
//! `tool_allowlist`, `runtime_policy`): a REVIEW, RESEARCH or DISCUSS wake is offered no
//! local-host toolset, and the policy travels with every round of the run, where the tools
//! stage enforces it again. The run may take the agent's `max_tool_rounds`.

use anyhow::anyhow;
use hermes_config::{local_host_toolsets, mcp_toolset};
use hermes_db::agents::{self, Agent};
use hermes_db::{Transaction, runs};
use hermes_runtime::stage::StageError;
use hermes_types::agent::{AgentKind, CONTRACT_VERSION, Dispatch, DispatchMode, EngagementMode};
use hermes_types::envelope::Envelope;
use hermes_types::model::{
    ChatMessage, ForgePreflight, ForgeTarget, ForgeWake, Inbound, LlmRequest, Role, ToolPolicy,
    ToolSpec, agent_tool_rounds,
};

use super::{Decided, Decision, Router};
use crate::soul::Persona;
use crate::{messages, tool_gate};

pub use hermes_types::model::FORGE_MCP_SERVER;

/// A Forge wake ready to commit.
#[derive(Clone)]
pub struct ForgeRun {
    inbound: Inbound,
    wake: ForgeWake,
    agent: Agent,
    policy: ToolPolicy,
    tools: Vec<ToolSpec>,
}

impl ForgeRun {
    /// The wake's inbound message.
    pub(super) fn inbound(&self) -> &Inbound {
        &self.inbound
    }
}

impl Router {
    pub(super) async fn prepare_forge(&self, inbound: Inbound) -> Result<Decision, StageError> {
        let wake = inbound
            .forge
            .clone()
            .ok_or_else(|| StageError::Poison(anyhow!("a Forge message without its wake")))?;
        let client = self.ctx.db.get().await?;
        let agent = agents::get(&client, wake.agent_id)
            .await?
            .filter(|a| a.kind == AgentKind::Internal)
            .ok_or_else(|| {
                StageError::Poison(anyhow!(
                    "the internal agent of this Forge wake no longer exists"
                ))
            })?;
        let catalog = self.tools.tools(&client).await?;
        // The agent of an orchestrator workspace may delegate (docs/a2a.md).
        let catalog = self
            .orchestrators
            .offered(&client, catalog, Some(agent.workspace_id), 0)
            .await?;
        drop(client);
        // The agent's own mode and allowlist, narrowed by the wake's: a restricted side
        // keeps the run restricted, and only what both lists name stays allowed.
        let policy = ToolPolicy {
            engagement_mode: agent.engagement_mode,
            tool_allowlist: agent.tool_allowlist.clone(),
        }
        .inherit(&inbound.policy);
        let local = local_host_toolsets(&self.ctx.config.mcp_servers);
        let tools = offered(catalog, &agent.toolsets, &policy, &local);
        Ok(Decision::Forge(Box::new(ForgeRun {
            inbound,
            wake,
            agent,
            policy,
            tools,
        })))
    }

    pub(super) async fn commit_forge(
        &self,
        env: &Envelope,
        f: ForgeRun,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Decided), StageError> {
        let tier = f.agent.tier.unwrap_or(self.ctx.config.api.tier);
        let text = f.inbound.event.text.clone();
        if !self
            .create_run(env, &f.inbound, tier, text.as_deref(), tx)
            .await?
        {
            return Ok((Vec::new(), Decided::uncharged("duplicate")));
        }
        let dispatch = Dispatch {
            mode: DispatchMode::Assigned,
            chosen: f.agent.profile_key.clone(),
            reason: format!(
                "woken by a Forge: {} (delivery {})",
                f.wake.event, f.wake.delivery_id
            ),
        };
        let contract_version = f
            .wake
            .contract_version
            .as_deref()
            .unwrap_or(CONTRACT_VERSION);
        runs::set_agent_routing(
            tx,
            env.run_id,
            &runs::AgentRouting {
                agent_id: f.agent.id,
                dispatch: &dispatch,
                engagement_mode: f.policy.engagement_mode,
                contract_version,
            },
        )
        .await?;
        let data = serde_json::json!({
            "dispatch": dispatch,
            "engagement_mode": f.policy.engagement_mode,
            "forge": { "delivery_id": f.wake.delivery_id, "event": f.wake.event },
        });
        agents::record_activity(
            tx,
            env.run_id,
            Some(f.agent.id),
            None,
            "run.dispatched",
            &data,
        )
        .await?;
        tracing::info!(
            agent = f.agent.profile_key,
            mode = f.policy.engagement_mode.as_str(),
            tools = f.tools.len(),
            "Forge wake routed"
        );
        let chain = self.tier_chain(tier);
        let persona = Persona::of(Some(&f.agent), &self.ctx.config.router.persona);
        let rounds = agent_tool_rounds(f.agent.max_tool_rounds);
        let target = f
            .inbound
            .event
            .metadata
            .as_ref()
            .map(ForgeTarget::of_wake)
            .unwrap_or_default();
        let system = vec![
            persona.render(),
            loop_prompt(&f.wake, f.policy.engagement_mode, rounds)
                + &answer_prompt(target.thread_id.as_deref(), &f.tools),
        ];
        let user_turn = ChatMessage::text(Role::User, wake_turn(&f.inbound, &f.wake));
        let messages = messages::conversation(system, Vec::new(), user_turn);
        let request = LlmRequest {
            tools: f.tools,
            backend: f.agent.backend.clone(),
            workspace: Some(f.agent.workspace_id),
            policy: f.policy,
            max_tool_rounds: rounds,
            ..LlmRequest::new(f.inbound.reply_to(), tier, chain, messages)
        };
        let preflight = ForgePreflight { request, target };
        Ok((vec![env.follow(&preflight)], Decided::uncharged("forge")))
    }
}

/// What a Forge run is offered: the catalog within the agent's toolsets (the Forge's own
/// toolset always among them, or the agent could not reach its inbox), without the
/// local-host toolsets its policy disables.
fn offered(
    catalog: Vec<ToolSpec>,
    agent_toolsets: &[String],
    policy: &ToolPolicy,
    local_host: &[String],
) -> Vec<ToolSpec> {
    let mut toolsets = agent_toolsets.to_vec();
    if !toolsets.is_empty() {
        toolsets.push(mcp_toolset(FORGE_MCP_SERVER));
    }
    tool_gate::offered_to(
        catalog,
        &toolsets,
        policy.engagement_mode,
        local_host,
        policy.tool_allowlist.as_deref(),
    )
}

/// The offered Forge tool whose name ends with `suffix` (`inbox_list`, …), else the name
/// the contract's tool would have (`mcp_forge_<suffix>`).
fn forge_tool(tools: &[ToolSpec], suffix: &str) -> String {
    let prefix = format!("mcp_{FORGE_MCP_SERVER}_");
    tools
        .iter()
        .map(|t| t.name.as_str())
        .find(|n| n.starts_with(&prefix) && n.ends_with(suffix))
        .map_or_else(|| format!("{prefix}{suffix}"), str::to_string)
}

/// The system block that tells the model where the contract's loop stands: Hermes has
/// listed, acknowledged and read the run (the bundle ends the user turn); the model acts.
fn loop_prompt(wake: &ForgeWake, mode: EngagementMode, rounds: u8) -> String {
    let mode_line = match mode {
        EngagementMode::Execute => {
            "Engagement mode: EXECUTE. You may change the Forge's state within the run's protocol."
                .to_string()
        }
        restricted => format!(
            "Engagement mode: {restricted}. Read, think and reply; do not change issue state. Local host tools (terminal, file patching, code execution) are disabled for this run."
        ),
    };
    format!(
        "A Forge woke you (event {event}, delivery {delivery}). The wake only says there is work; \
the Forge's inbox is the source of truth. Hermes has already done the loop's first steps for you: it listed your \
unacked runs, found this one, acknowledged it, and read its context bundle, which ends the user turn (what is asked, \
the recent conversation and the runProtocol: mode, what you may change). Do not list or acknowledge again.\n\
You have at most {rounds} tool round(s).\n{mode_line}",
        event = wake.event,
        delivery = wake.delivery_id,
    )
}

/// Where the model's answer goes: a chat wake's (with its `threadId`) final message is
/// posted to the thread by Hermes (docs/agents.md, "Answers stream to the Forge"); any
/// other run's reaches the Forge only through the tools.
fn answer_prompt(thread: Option<&str>, tools: &[ToolSpec]) -> String {
    let append = forge_tool(tools, "chat_appendMessage");
    match thread {
        Some(thread) => format!(
            "\nYour final message is your answer: Hermes posts it to the chat thread {thread} as it \
streams. Do not post it yourself with {append}."
        ),
        None => format!(
            "\nAct with the Forge's tools, for example {append} to answer in the run's thread. \
Your final message is not delivered anywhere: only what you do through the tools reaches the Forge."
        ),
    }
}

/// The user turn of a Forge run: the wake envelope as the Forge sent it.
fn wake_turn(inbound: &Inbound, wake: &ForgeWake) -> String {
    let envelope = inbound
        .event
        .metadata
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_else(|| "{}".into());
    format!("Forge wake {}:\n{envelope}", wake.event)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_types::ids::{AgentId, WorkspaceId};

    fn spec(name: &str, toolset: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "d".into(),
            parameters: serde_json::json!({"type": "object"}),
            toolset: toolset.into(),
        }
    }

    fn wake() -> ForgeWake {
        ForgeWake {
            agent_id: AgentId::new(),
            workspace_id: WorkspaceId::new(),
            delivery_id: "dlv_1".into(),
            event: "AGENT_ASSIGNED".into(),
            contract_version: None,
        }
    }

    #[test]
    fn the_forge_toolset_is_always_offered_and_a_restricted_wake_gets_no_host_tools() {
        let catalog = vec![
            spec("mcp_forge_inbox_list", "mcp-forge"),
            spec("mcp_shell_run", "mcp-shell"),
            spec("web_search", "web"),
        ];
        let local = vec!["mcp-shell".to_string()];
        let names = |tools: Vec<ToolSpec>| tools.into_iter().map(|t| t.name).collect::<Vec<_>>();
        let execute = ToolPolicy::default();
        assert_eq!(
            names(offered(catalog.clone(), &[], &execute, &local)).len(),
            3
        );
        // An agent narrowed to `web` still reaches its inbox.
        assert_eq!(
            names(offered(catalog.clone(), &["web".into()], &execute, &local)),
            ["mcp_forge_inbox_list", "web_search"]
        );
        let review = ToolPolicy {
            engagement_mode: EngagementMode::Review,
            tool_allowlist: None,
        };
        assert_eq!(
            names(offered(catalog.clone(), &[], &review, &local)),
            ["mcp_forge_inbox_list", "web_search"]
        );
        // An empty allowlist (the seed's REVIEW dispatch) allows no host tool even in EXECUTE.
        let listed = ToolPolicy {
            engagement_mode: EngagementMode::Execute,
            tool_allowlist: Some(Vec::new()),
        };
        assert_eq!(
            names(offered(catalog, &[], &listed, &local)),
            ["mcp_forge_inbox_list", "web_search"]
        );
    }

    #[test]
    fn the_prompt_says_the_loop_is_done_and_names_the_offered_forge_tools_and_the_mode() {
        let tools = [spec("mcp_forge_chat_appendMessage", "mcp-forge")];
        let p = loop_prompt(&wake(), EngagementMode::Review, 4);
        assert!(p.contains("acknowledged it"), "{p}");
        assert!(p.contains("Do not list or acknowledge again"), "{p}");
        let assigned = answer_prompt(None, &tools);
        assert!(
            assigned.contains("for example mcp_forge_chat_appendMessage"),
            "{assigned}"
        );
        assert!(assigned.contains("not delivered anywhere"), "{assigned}");
        let chat = answer_prompt(Some("thr_1"), &tools);
        assert!(chat.contains("posts it to the chat thread thr_1"), "{chat}");
        assert!(chat.contains("Do not post it yourself"), "{chat}");
        assert!(p.contains("REVIEW") && p.contains("disabled"), "{p}");
        assert!(p.contains("at most 4 tool round"), "{p}");
        let p = loop_prompt(&wake(), EngagementMode::Execute, 1);
        assert!(!p.contains("disabled"), "{p}");
    }
}
