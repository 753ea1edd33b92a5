//! The OpenAI-compatible API's messages: the caller brings its own conversation, sampling
//! parameters and streaming choice; no user, no credit. Only what can be continued (a
//! stored response, a run continuing one) has a session, its chain's. A run dispatched with an
//! engagement mode or a tool allowlist (`POST /v1/runs`) is offered, and may execute, only
//! what that policy allows, as an agent's run is (docs/api.md, runs). A tenant key's runs
//! (its chat completions, responses, runs and jobs) get no local-host tool unless the key
//! was granted its toolset (`hermes api-keys create|set --toolsets`): the grant becomes the
//! run's allowlist, which the tools stage enforces too (docs/security.md, "Keys and tenants").

use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use chrono::Utc;
use hermes_db::{Transaction, runs, sessions};
use hermes_runtime::stage::StageError;
use hermes_types::envelope::Envelope;
use hermes_types::ids::ApiKeyId;
use hermes_types::model::{ApiSession, ChatMessage, Inbound, LlmRequest, Role, Tier, ToolSpec};
use hermes_types::ttl_cache::TtlCache;

use super::{Decided, Decision, Router};
use crate::{messages, tool_gate};
use hermes_config::local_host_toolsets;

/// How long a key's grant is trusted before it is read again: a change made with
/// `hermes api-keys set --toolsets` applies within it, like the key's other limits.
const GRANTS_TTL: Duration = Duration::from_secs(30);

/// Keys whose grants are remembered at once.
const GRANTS_CACHED: usize = 10_000;

/// The local-host toolsets each API key was granted, read from `api_keys` and cached.
pub struct KeyGrants(TtlCache<ApiKeyId, Arc<[String]>>);

impl Default for KeyGrants {
    fn default() -> Self {
        Self(TtlCache::new(GRANTS_TTL, GRANTS_CACHED))
    }
}

impl KeyGrants {
    /// What `key` was granted; a key deleted since its message was sent has nothing.
    async fn of(
        &self,
        client: &hermes_db::Client,
        key: ApiKeyId,
    ) -> Result<Arc<[String]>, StageError> {
        if let Some(granted) = self.0.get(&key) {
            return Ok(granted);
        }
        let granted: Arc<[String]> = hermes_db::api_keys::toolsets_of(client, key)
            .await?
            .unwrap_or_default()
            .into();
        self.0.insert(key, granted.clone());
        Ok(granted)
    }
}

/// The allowlist of a key's run: the local-host tools of `catalog` that both the key's
/// `granted` list and the run's own `requested` allowlist (if any) name, by toolset or by
/// tool. Empty when the key was granted none: no local-host tool is offered or may run.
pub fn key_allowlist(
    catalog: &[ToolSpec],
    local_host: &[String],
    granted: &[String],
    requested: Option<&[String]>,
) -> Vec<String> {
    let names = |list: &[String], t: &ToolSpec| list.contains(&t.toolset) || list.contains(&t.name);
    catalog
        .iter()
        .filter(|t| local_host.contains(&t.toolset))
        .filter(|t| names(granted, t) && requested.is_none_or(|r| names(r, t)))
        .map(|t| t.name.clone())
        .collect()
}

impl Router {
    pub(super) async fn prepare_api(&self, mut inbound: Inbound) -> Result<Decision, StageError> {
        let messages = messages::under_core_prompt(
            self.ctx.config.api.core_prompt(),
            messages::api_turns(&inbound),
        );
        let has_user_text = messages.iter().any(|m| {
            m.role == Role::User && m.content.as_deref().is_some_and(|c| !c.trim().is_empty())
        });
        if !has_user_text {
            return Err(StageError::Poison(anyhow!(
                "inbound message has no user text or media"
            )));
        }
        let client = self.ctx.db.get().await?;
        let mut catalog = self.tools.tools(&client).await?;
        // An orchestrator workspace's run may delegate, within the depth (docs/a2a.md).
        let depth = inbound.delegation.map_or(0, |d| d.depth);
        catalog = self
            .orchestrators
            .offered(&client, catalog, inbound.workspace, depth)
            .await?;
        // A scheduled job may narrow its tools to some toolsets (docs/api.md, jobs).
        if let Some(toolsets) = inbound.job.as_ref().and_then(|j| j.toolsets.as_ref()) {
            catalog.retain(|t| toolsets.contains(&t.toolset));
        }
        let local = local_host_toolsets(&self.ctx.config.mcp_servers);
        // A tenant key's run: only what the key was granted (the operator key's runs, which
        // have no key id, keep every tool their policy allows).
        if let Some(key) = inbound.api_key_id {
            let granted = self.grants.of(&client, key).await?;
            let requested = inbound.policy.tool_allowlist.as_deref();
            inbound.policy.tool_allowlist =
                Some(key_allowlist(&catalog, &local, &granted, requested));
        }
        let policy = &inbound.policy;
        let tools = tool_gate::offered_to(
            catalog,
            &[],
            policy.engagement_mode,
            &local,
            policy.tool_allowlist.as_deref(),
        );
        Ok(Decision::Api {
            inbound,
            messages,
            tools,
        })
    }

    pub(super) async fn commit_api(
        &self,
        env: &Envelope,
        inbound: Inbound,
        messages: Vec<ChatMessage>,
        tools: Vec<ToolSpec>,
        tx: &Transaction<'_>,
    ) -> Result<(Vec<Envelope>, Decided), StageError> {
        let tier = self.ctx.config.api.tier;
        let input_text = messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .and_then(|m| m.content.clone());
        if !self
            .create_run(env, &inbound, tier, input_text.as_deref(), tx)
            .await?
        {
            return Ok((Vec::new(), Decided::uncharged("duplicate")));
        }
        // A delegated run queued while its parent was being stopped is stopped now.
        if inbound.delegation.is_some() {
            hermes_db::delegations::inherit_stop(tx, env.run_id).await?;
        }
        if let Some(api_session) = inbound.api_session {
            let continued = match api_session {
                ApiSession::Open => None,
                ApiSession::Continue(id) => Some(id),
            };
            let chat = &inbound.event.chat_id;
            let session =
                sessions::api_session(tx, inbound.api_key_id, continued, chat, Utc::now()).await?;
            runs::set_session(tx, env.run_id, session.id).await?;
        }
        tracing::info!(tier = tier.as_str(), tools = tools.len(), "run routed");
        // Images go to the vision model, as a channel's do (docs/api.md, images); a scheduled
        // job's model override is tried first, the tier's chain after it.
        let mut chain = if messages.iter().any(|m| !m.images.is_empty()) {
            vec![self.ctx.config.router.vision_model.clone()]
        } else {
            self.tier_chain(tier)
        };
        // A model the caller chose (`provider:model`, or a job's) goes first; the chain
        // after it is the failover.
        let chosen = inbound.job.as_ref().and_then(|j| j.model.as_ref());
        if let Some(model) = chosen.or(inbound.chosen_model.as_ref()) {
            chain.retain(|m| m != model);
            chain.insert(0, model.clone());
        }
        let request = api_request(inbound, tier, chain, messages, tools);
        Ok((vec![env.follow(&request)], Decided::uncharged("routed")))
    }
}

/// The model call for an OpenAI-compatible API message: the caller's own conversation,
/// and its sampling parameters and streaming choice passed through unchanged (ingest
/// validated them), because they are the caller's to set, not the router's.
fn api_request(
    inbound: Inbound,
    tier: Tier,
    chain: Vec<String>,
    messages: Vec<ChatMessage>,
    tools: Vec<ToolSpec>,
) -> LlmRequest {
    // API callers have no agent: the tier's chain and the global provider secrets apply,
    // or an A2A task's workspace's.
    LlmRequest {
        tools,
        requested_model: inbound.requested_model.clone(),
        params: inbound.params.clone(),
        stream: inbound.stream,
        api_key: inbound.api_key_id,
        // An A2A task's workspace: its provider secrets apply (docs/a2a.md).
        workspace: inbound.workspace,
        // The tools stage refuses what the policy forbids, whatever the model asks for.
        policy: inbound.policy.clone(),
        ..LlmRequest::new(inbound.reply_to(), tier, chain, messages)
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use hermes_types::model::{CallParams, JsonSchemaFormat, MessageEvent, Platform};
    use serde_json::json;

    use super::*;

    fn api_inbound(params: CallParams, stream: bool) -> Inbound {
        Inbound {
            conversation: vec![ChatMessage::text(Role::User, "hi")],
            requested_model: Some("gpt-x".into()),
            params,
            stream,
            ..Inbound::of(MessageEvent {
                platform: Platform::Api,
                sender_id: "api".into(),
                chat_id: "run".into(),
                text: Some("hi".into()),
                media: Vec::new(),
                external_message_id: None,
                sender_name: None,
                received_at: Utc::now(),
                metadata: None,
            })
        }
    }

    #[test]
    fn the_callers_parameters_reach_the_model_call() {
        let params = CallParams {
            temperature: Some(0.2),
            top_p: Some(0.9),
            stop: vec!["END".into()],
            max_tokens: Some(64),
            response_format: Some(JsonSchemaFormat {
                name: "answer".into(),
                schema: json!({"type": "object"}),
                strict: true,
            }),
        };
        // Through JSON, as the message crosses the broker between ingest and the router.
        let wire = serde_json::to_vec(&api_inbound(params.clone(), true)).unwrap();
        let inbound: Inbound = serde_json::from_slice(&wire).unwrap();
        let messages = messages::api_turns(&inbound);
        let request = api_request(inbound, Tier::Free, vec!["m".into()], messages, Vec::new());
        assert_eq!(request.params, params);
        assert!(request.stream);
        assert_eq!(request.requested_model.as_deref(), Some("gpt-x"));
        assert!(request.exchange.is_none() && request.backend.is_none());
    }

    #[test]
    fn the_dispatch_policy_reaches_the_model_call() {
        use hermes_types::agent::EngagementMode;
        use hermes_types::model::ToolPolicy;
        let mut inbound = api_inbound(CallParams::default(), true);
        inbound.policy = ToolPolicy {
            engagement_mode: EngagementMode::Review,
            tool_allowlist: Some(vec!["web".into()]),
        };
        let wire = serde_json::to_vec(&inbound).unwrap();
        let inbound: Inbound = serde_json::from_slice(&wire).unwrap();
        let policy = inbound.policy.clone();
        let request = api_request(inbound, Tier::Free, Vec::new(), Vec::new(), Vec::new());
        assert_eq!(request.policy, policy);
    }

    #[test]
    fn a_keys_run_may_use_only_the_host_tools_it_was_granted() {
        let tool = |name: &str, toolset: &str| ToolSpec {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
            toolset: toolset.into(),
        };
        let catalog = vec![
            tool("current_time", "builtin"),
            tool("shell_run", "mcp-shell"),
            tool("shell_kill", "mcp-shell"),
            tool("files_read", "mcp-files"),
        ];
        let local = vec!["mcp-shell".to_string(), "mcp-files".to_string()];
        let names = |v: Vec<String>| v.join(",");
        // Granted nothing: no host tool, whatever the run asks for.
        assert_eq!(names(key_allowlist(&catalog, &local, &[], None)), "");
        let asked = vec!["mcp-shell".to_string()];
        assert_eq!(
            names(key_allowlist(&catalog, &local, &[], Some(&asked))),
            ""
        );
        // A toolset granted: its tools; a tool granted: that one.
        let shell = vec!["mcp-shell".to_string()];
        assert_eq!(
            names(key_allowlist(&catalog, &local, &shell, None)),
            "shell_run,shell_kill"
        );
        let one = vec!["files_read".to_string()];
        assert_eq!(
            names(key_allowlist(&catalog, &local, &one, None)),
            "files_read"
        );
        // The run's own allowlist narrows the grant, by tool or by toolset.
        let run = vec!["shell_kill".to_string()];
        assert_eq!(
            names(key_allowlist(&catalog, &local, &shell, Some(&run))),
            "shell_kill"
        );
        let both = vec!["mcp-shell".to_string(), "mcp-files".to_string()];
        assert_eq!(
            names(key_allowlist(&catalog, &local, &both, Some(&one))),
            "files_read"
        );
        // Tools that act off the host are never in the list (no list applies to them).
        let builtin = vec!["builtin".to_string()];
        assert_eq!(names(key_allowlist(&catalog, &local, &builtin, None)), "");
    }

    #[test]
    fn defaults_stay_off_the_wire() {
        let inbound = api_inbound(CallParams::default(), false);
        let v = serde_json::to_value(&inbound).unwrap();
        assert!(v.get("params").is_none() && v.get("stream").is_none());
        let request = api_request(inbound, Tier::Free, Vec::new(), Vec::new(), Vec::new());
        assert!(request.params.is_default() && !request.stream);
    }
}
