//! Starting a round's delegations (docs/a2a.md, "Delegating to other workspaces"). The
//! `delegate_task_async` calls of a round are read and checked together
//! ([`plan`]): each that names a workspace and a task within the bounds becomes a run of that
//! workspace ([`Child`]), and each that cannot gets a refusal as its result, so the model
//! can correct it. The stage then holds the round, links the runs to it and queues them in
//! one transaction ([`commit`]); the close of the last of them resumes the round
//! (`hermes_db::delegations`).
//!
//! A delegated run is an A2A task of its workspace, sent by the parent's key: the workspace's
//! role and model answer it, its provider secrets pay for it, it is metered on its own row,
//! and the key that sent the parent can follow it with `tasks/get`. It runs under the
//! parent's tool policy (its engagement mode and allowlist), so a restricted run never gets
//! back the local-host tools it was denied by delegating.

use std::collections::BTreeMap;

use hermes_config::ModelSpec;
use hermes_db::a2a_tasks::{self, NewTask};
use hermes_db::delegations::{self, NewDelegation};
use hermes_db::workspace_api::{self, Profile};
use hermes_db::workspaces::{self, Workspace};
use hermes_db::{GenericClient, Transaction};
use hermes_runtime::Ctx;
use hermes_runtime::stage::StageError;
use hermes_types::envelope::Envelope;
use hermes_types::ids::{RunId, WorkspaceId};
use hermes_types::model::delegation::{
    self as rules, Delegated, MAX_DEPTH, MAX_PER_ROUND, TOOL_NAME,
};
use hermes_types::model::{
    ChatMessage, Inbound, MessageEvent, Platform, Role, ToolRequest, ToolResult,
};
use serde_json::json;

use crate::builtin::DelegateTask;
use crate::policy::Permit;

/// A run a call starts.
pub struct Child {
    pub call_id: String,
    pub run: RunId,
    pub workspace: WorkspaceId,
    pub task: String,
    /// How deep it is (its parent's depth + 1).
    pub depth: u8,
    pub inbound: Inbound,
}

/// What a round's delegation calls come to: the runs to start, and the results of the
/// calls that start none.
#[derive(Default)]
pub struct Plan {
    pub children: Vec<Child>,
    pub refused: Vec<ToolResult>,
}

/// Why a call starts no run (the `reason` of its result).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    InvalidArguments,
    UnknownWorkspace,
    TooMany,
    TooDeep,
}

impl Refusal {
    fn as_str(self) -> &'static str {
        match self {
            Refusal::InvalidArguments => "invalid_arguments",
            Refusal::UnknownWorkspace => "unknown_workspace",
            Refusal::TooMany => "too_many_delegations",
            Refusal::TooDeep => "delegation_too_deep",
        }
    }
}

/// The delegation calls of `req` (run `run`) that still need starting: offered to the run,
/// with no result yet and not denied by an operator.
fn pending<'a>(req: &'a ToolRequest, permit: Permit<'_>) -> Vec<&'a hermes_types::model::ToolCall> {
    req.calls
        .iter()
        .filter(|c| c.name == TOOL_NAME && permit.offers(&c.name))
        .filter(|c| req.result_of(&c.id).is_none())
        .filter(|c| crate::approval::decision(req, &c.id).is_none_or(|d| d.verdict.runs()))
        .collect()
}

/// Read and check the delegation calls of run `run`'s round `req` (see the module doc).
pub async fn plan(
    ctx: &Ctx,
    run: RunId,
    req: &ToolRequest,
    permit: Permit<'_>,
) -> Result<Plan, StageError> {
    let calls = pending(req, permit);
    let mut plan = Plan::default();
    if calls.is_empty() {
        return Ok(plan);
    }
    let client = ctx.db.get().await?;
    let depth = delegations::depth_of(&client, run).await?.saturating_add(1);
    for (i, call) in calls.into_iter().enumerate() {
        let refuse = |plan: &mut Plan, why: Refusal, message: String| {
            plan.refused.push(ToolResult {
                call_id: call.id.clone(),
                text: rules::refusal_text(why.as_str(), &message),
            })
        };
        if depth > MAX_DEPTH {
            refuse(
                &mut plan,
                Refusal::TooDeep,
                format!("this run was delegated {MAX_DEPTH} deep already: it cannot delegate"),
            );
            continue;
        }
        if i >= MAX_PER_ROUND {
            refuse(
                &mut plan,
                Refusal::TooMany,
                format!("at most {MAX_PER_ROUND} delegations per turn: send the rest later"),
            );
            continue;
        }
        let args = match DelegateTask::arguments(&call.arguments) {
            Ok(args) => args,
            Err(e) => {
                refuse(&mut plan, Refusal::InvalidArguments, e.to_string());
                continue;
            }
        };
        let Some((workspace, profile)) = find(&client, &args.workspace).await? else {
            refuse(
                &mut plan,
                Refusal::UnknownWorkspace,
                format!("no workspace {:?}", args.workspace),
            );
            continue;
        };
        let child = RunId::new();
        let to = Target {
            parent: run,
            child,
            workspace: &workspace,
            profile: &profile,
            depth,
        };
        let inbound = inbound(&ctx.config.models, req, &to, &args.task);
        plan.children.push(Child {
            call_id: call.id.clone(),
            run: child,
            workspace: workspace.id,
            task: args.task,
            depth,
            inbound,
        });
    }
    Ok(plan)
}

/// The workspace `name` names: by id, else by slug.
async fn find(
    client: &impl GenericClient,
    name: &str,
) -> Result<Option<(Workspace, Profile)>, StageError> {
    let id = match name.parse::<WorkspaceId>() {
        Ok(id) => Some(id),
        Err(_) => workspaces::id_by_slug(client, name).await?,
    };
    Ok(match id {
        Some(id) => workspace_api::by_id(client, id).await?,
        None => None,
    })
}

/// Where a delegated run goes.
struct Target<'a> {
    parent: RunId,
    child: RunId,
    workspace: &'a Workspace,
    profile: &'a Profile,
    depth: u8,
}

/// The message that starts the run `to` names: the task, under the workspace's role, for
/// its model (when `models` configures it), sent by the parent's key under the parent's
/// policy.
fn inbound(
    models: &BTreeMap<String, ModelSpec>,
    req: &ToolRequest,
    to: &Target<'_>,
    task: &str,
) -> Inbound {
    let Target {
        parent,
        child,
        workspace,
        profile,
        depth,
    } = *to;
    let mut conversation: Vec<ChatMessage> = profile
        .role
        .iter()
        .map(|r| ChatMessage::text(Role::System, r.clone()))
        .collect();
    conversation.push(ChatMessage::text(Role::User, task));
    // The workspace's model goes first when the install configures it, as for its A2A
    // tasks; otherwise the API tier's chain answers.
    let chosen_model = profile
        .model
        .as_deref()
        .and_then(|name| hermes_config::resolve_model(models, name).ok().flatten());
    let event = MessageEvent {
        platform: Platform::Api,
        sender_id: "delegation".into(),
        chat_id: child.to_string(),
        text: Some(task.to_string()),
        media: Vec::new(),
        external_message_id: None,
        sender_name: None,
        received_at: chrono::Utc::now(),
        metadata: Some(json!({"delegation": {
            "parent_run": parent.to_string(),
            "workspace": workspace.id.to_string(),
        }})),
    };
    Inbound {
        conversation,
        requested_model: profile.model.clone(),
        chosen_model,
        api_key_id: req.request.api_key,
        workspace: Some(workspace.id),
        policy: req.request.policy.clone(),
        delegation: Some(Delegated { parent, depth }),
        ..Inbound::of(event)
    }
}

/// In the stage's transaction: hold round `req` of run `env.run_id` with the results it
/// has, link each child to it and record it as an A2A task of its workspace; the messages
/// that start them, which the stage queues with its commit.
pub async fn commit(
    tx: &Transaction<'_>,
    env: &Envelope,
    req: &ToolRequest,
    children: Vec<Child>,
) -> Result<Vec<Envelope>, StageError> {
    delegations::hold(tx, env.run_id, req).await?;
    let round = req.request.tool_round;
    let context = format!("delegation-{}", env.run_id);
    let mut started = Vec::with_capacity(children.len());
    for child in children {
        delegations::link(
            tx,
            round,
            &NewDelegation {
                child: child.run,
                parent: env.run_id,
                call_id: &child.call_id,
                workspace: child.workspace,
                depth: child.depth,
                task: &child.task,
            },
        )
        .await?;
        a2a_tasks::insert(
            tx,
            &NewTask {
                run_id: child.run,
                workspace_id: child.workspace,
                api_key_id: req.request.api_key,
                context_id: &context,
                message_id: &child.call_id,
                input: &child.task,
            },
        )
        .await?;
        let traceparent = env.traceparent.as_ref().map(|t| t.child());
        started.push(Envelope::new(child.run, traceparent, &child.inbound));
    }
    Ok(started)
}

#[cfg(test)]
mod tests {
    use hermes_types::agent::EngagementMode;
    use hermes_types::ids::ApiKeyId;
    use hermes_types::model::{LlmRequest, ReplyTo, Tier, ToolPolicy};

    use super::*;

    #[test]
    fn a_delegated_run_keeps_the_parents_key_and_policy_under_its_workspaces_role() {
        let to = ReplyTo::chat(Platform::Api, "c");
        let key = ApiKeyId::new();
        let policy = ToolPolicy {
            engagement_mode: EngagementMode::Review,
            tool_allowlist: Some(vec!["mcp-files".into()]),
        };
        let req = ToolRequest {
            request: LlmRequest {
                api_key: Some(key),
                policy: policy.clone(),
                ..LlmRequest::new(to, Tier::Free, Vec::new(), Vec::new())
            },
            calls: Vec::new(),
            decisions: Vec::new(),
            results: Vec::new(),
        };
        let workspace = Workspace {
            id: WorkspaceId::new(),
            slug: "writers".into(),
            name: "Writers".into(),
            key: "WRITERS".into(),
            key_set: false,
            signing_secret: false,
            daily_tokens: None,
            daily_micro_usd: None,
            orchestrator: false,
            agents: 0,
            created_at: chrono::Utc::now(),
        };
        let profile = Profile {
            runtime: Some("hermes".into()),
            model: Some("ollama:llama3.1".into()),
            role: Some("You write release notes.".into()),
            orchestrator: false,
        };
        let (parent, child) = (RunId::new(), RunId::new());
        let target = Target {
            parent,
            child,
            workspace: &workspace,
            profile: &profile,
            depth: 2,
        };
        let models = hermes_config::FileConfig::default().models;
        let inbound = inbound(&models, &req, &target, "Draft the notes");
        assert_eq!(inbound.api_key_id, Some(key));
        assert_eq!(
            inbound.policy, policy,
            "the parent's disabled toolsets stay disabled"
        );
        assert_eq!(inbound.workspace, Some(workspace.id));
        assert_eq!(inbound.delegation, Some(Delegated { parent, depth: 2 }));
        assert_eq!(inbound.event.platform, Platform::Api);
        assert_eq!(inbound.event.chat_id, child.to_string());
        assert_eq!(inbound.chosen_model.as_deref(), Some("ollama"));
        let turns: Vec<_> = inbound
            .conversation
            .iter()
            .map(|m| (m.role, m.content.clone().unwrap_or_default()))
            .collect();
        assert_eq!(
            turns,
            [
                (Role::System, "You write release notes.".to_string()),
                (Role::User, "Draft the notes".to_string()),
            ]
        );
    }
}
